#ifndef FEDPROF_PROTOCOL_MESSAGES_H_
#define FEDPROF_PROTOCOL_MESSAGES_H_

// What a server and its clients exchange in a round, the same whether the
// clients live in the server's process, on other ranks or on other machines.
// Plain data, free of torch and of any wire format: transports translate
// these to and from their own encodings (protocol/wire.h for gRPC and
// torch.distributed).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/profiling/profile.h"

namespace fedprof {

struct TrainOptions {
  int epochs = 5;
  int64_t batch_size = 32;
  double lr = 0.01;  // this round's learning rate (decay already applied)
  double momentum = 0.9;
  double weight_decay = 0;
};

// What the server knows about a client without seeing its data: what it
// registered with (a deployment) or the population says (a simulation).
struct ClientInfo {
  int id = -1;
  int64_t num_samples = 0;      // |D_k| as the client states it (bounded by the transport)
  double expected_time_s = -1;  // a round's expected duration; < 0 when unknown
};

// What a client reports besides its model, computed with θ as received
// before training (and, for the sketch, from what training changed).
struct ReportRequest {
  // Profile the local data with θ (FedProf, Alg. 2 line 15) and/or report
  // θ's mean loss on it (AFL's valuation).
  bool profile = false;
  bool loss = false;
  // The strategy needs the training loss and its RMS of each result (Oort);
  // under secure aggregation a client sends them only then.
  bool train_loss = false;
  // Federated evaluation: evaluate θ on the local data (FitResult::eval_*).
  bool evaluate = false;
  // > 0: also return a count sketch of this size of the update w − θ
  // (under FedBN, w minus θ with the client's batch norm: what training
  // changed); clustered sampling compares clients through it.
  int sketch_dim = 0;
  // Secure matching (App. C.2, privacy/secure_matching.h): the server's
  // Paillier public key and its encrypted reference for the model version.
  // When set, the client returns Enc(q·div) of its profile instead of the
  // profile.
  std::shared_ptr<const std::string> public_key;
  std::shared_ptr<const std::string> secure_reference;
};

// What a client's own config's strategy reads of it beside its model
// (strategy.h's StrategyReads): what its server half asks for, and nothing
// else, is what a strategy of that config could need.
struct ClientReads {
  bool profile = false;     // its profile, or the divergence under Paillier matching (FedProf)
  bool loss = false;        // the received model's loss on its data (AFL)
  bool train_loss = false;  // its training loss and that loss's RMS (Oort)
  bool evaluate = false;    // federated evaluation (eval.federated_every)
  int sketch_dim = 0;       // a count sketch of its update of this size (Clustered Sampling)
};

// What the client's local objective adds to the loss on its data, and the
// client algorithm that runs around its local training (algorithms/).
struct LocalObjective {
  // μ of FedProx's proximal term μ/2 ||w − θ||².
  double prox_mu = 0;
  // FedBN: the client keeps its own batch-norm parameters and statistics,
  // replacing θ's with them (after its first round).
  bool keep_local_batch_norm = false;
  // The client algorithm (algorithms/algorithm.h): "" for plain local SGD,
  // else scaffold, fednova, feddyn or moon, with its options.
  std::string algorithm;
  bool scaffold_correct = true;  // SCAFFOLD: correct each step by c − c_i
  double feddyn_alpha = 0;       // FedDyn's α
  double moon_mu = 0;            // MOON's μ and τ
  double moon_tau = 0.5;
};

// What the server sends one client for one task: a round's training, or
// with train.epochs == 0 only the reports asked for (no model comes back).
// The strategy fills it whole (Strategy::ConfigureFit); clients of the same
// call share θ (one shared_ptr), never a copy each.
struct FitInstructions {
  int64_t round = 0;
  std::shared_ptr<const FlatParams> global;  // the global model θ
  int64_t model_version = 0;                 // v: the round that produced θ
  ReportRequest report;
  LocalObjective objective;
  TrainOptions train;
  uint64_t seed = 0;  // run seed; the client derives its batch order from it
  // > 0: the client clips its update w − θ to this L2 norm before sending it
  // (user-level DP, aggregation/dp_fedavg.h); the server re-checks it.
  double clip_norm = 0;
  // Distributed DP: the round's encoding of the clipped update, which goes
  // into secure aggregation noised by the client (privacy/distributed_dp.h).
  std::optional<DdgParams> ddg;
  // What the client algorithm's server half sends beside θ (SCAFFOLD's
  // control variate c), shared like θ; null when it sends nothing.
  std::shared_ptr<const FlatParams> algorithm_values;
};

// One client's instructions in a call to a transport (Transport::Fit).
struct ClientInstructions {
  int client_id = -1;
  FitInstructions instructions;
};

// What one result cost the client: virtual time and energy from the cost
// model in simulation, measured wall time in a deployment (energy 0 there).
struct ResultCost {
  double time_s = 0;
  double energy_j = 0;
  double profiling_time_s = 0;    // of time_s, what profiling added (Eq. 31)
  double profiling_energy_j = 0;  // of energy_j (Eq. 34)
};

// What a client returns. `ok` false means the client failed and its
// contribution must be skipped; `error` says why. Nothing in it is trusted
// before the server has checked it (Server::Validate, Strategy::CheckResult).
struct FitResult {
  int client_id = -1;  // stamped by the transport, never taken from the client
  bool ok = false;
  bool timed_out = false;  // no result in time, or the client left (ok is false)
  std::string error;
  FlatParams params;        // the locally trained model; empty when it only reported
  // The model went into a relay's partial sum instead (params stays empty):
  // it reaches the server, once the result is accepted, summed with others
  // (Transport::ResultSink::Sum).
  bool summed = false;
  int64_t num_samples = 0;  // |D_k|, the aggregation weight
  double train_loss = 0;    // mean loss over the last local epoch
  double train_loss_rms = 0;  // root mean square of its per-sample losses (Oort)
  bool within_clip = false;   // under clip_norm: the update needed no clipping
  std::optional<Profile> profile;  // when asked for, unless matched securely
  std::string encrypted_divergence;  // Enc(q·div) under secure matching
  double pre_train_loss = 0;       // θ's mean loss on the local data, when asked for
  std::vector<float> sketch;       // when asked for (sketch_dim)
  // Federated evaluation, when asked for: θ's results on the local data.
  int64_t eval_samples = 0;  // samples evaluated: all the client holds
  int64_t eval_correct = 0;  // of them, classified correctly (classification)
  double eval_loss = 0;      // mean loss over them
  // What the client algorithm sends beside the model: a vector the size of
  // the model (SCAFFOLD's Δc_i) and a number (FedNova's effective steps a_i).
  FlatParams algorithm_values;
  double algorithm_scalar = 0;
  ResultCost cost;
};

}  // namespace fedprof

#endif  // FEDPROF_PROTOCOL_MESSAGES_H_
