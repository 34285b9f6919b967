#ifndef FEDPROF_DEPLOY_CLIENT_H_
#define FEDPROF_DEPLOY_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fedprof/data/feature_scaling.h"
#include "fedprof/models/spec.h"
#include "fedprof/protocol/messages.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

struct GrpcClientOptions {
  std::string server;   // HOST:PORT
  // >= 0: `server` is relay `relay`, whose certificate the client expects
  // there (tls.h's RoleIdentity); else the server's.
  int relay = -1;
  // Directory of ca.crt, client-<id>.crt and client-<id>.key (mutual TLS);
  // empty: plaintext (loopback experiments only).
  std::string tls_dir;
  int id = -1;
  int64_t num_samples = 0;  // |D_k|, the claim the client registers with
  double speed_ghz = 0;     // optional device figures; 0 = not stated
  double bandwidth_mhz = 0;
  // SHA-256 (hex) of the TorchScript module this client would train
  // (model.file), stated at registration; empty = none.
  std::string model_sha256;
  // Keeps trying to reach the server this long (back-off from 0.25 s to
  // 5 heartbeat intervals, 1 to 10 s, with jitter, between tries) before
  // giving up, at the start and after losing it.
  double give_up_s = 300;
  // How long one task request may wait at the server (which caps it at
  // 30 s); heartbeats pause while one waits.
  double pull_wait_s = 25;
  bool progress = true;     // a line per task on stdout; of several clients, a line a round
  // What this client demands of secure aggregation, from its own config:
  // a task that breaks it is refused (a failed result saying why).
  SecAggPolicy secagg;
  // The file of what this client contributed to secure sums (its
  // ClientLedger); "" keeps it in memory. Its epsilons are at `ledger_delta`;
  // `budget` > 0: the most epsilon against the server it spends.
  std::string ledger;
  double ledger_delta = 1e-5;
  double budget = 0;
};

// What a client learns at each registration: the model the server trains,
// its size, and the scaling of tabular features (empty for images).
struct ServerSetup {
  ModelSpec model;
  int64_t num_params = 0;
  FeatureScaling features;
};

// What a client computes. `prepare` is called after each registration with
// the server's setup, before any task; `fit` computes a task. Both run on a
// worker thread and may throw (the client ends with that error).
struct GrpcClientWork {
  std::function<void(const ServerSetup& setup)> prepare;
  std::function<FitResult(const FitInstructions&)> fit;
};

// The client side of the deployment protocol (proto/federation.proto), for
// clients[i] with work[i], all in this process: each registers (again
// whenever the server has forgotten it, e.g. after a restart), sends
// heartbeats, pulls tasks, computes them and pushes the results, until the
// server says the run is done. Each client has its own channel and TLS
// identity; all run on gRPC's callback API, so a client waiting for a task,
// a reply or the end of its back-off holds no thread, and `workers` threads
// (at least 1) compute for all of them. Returns once every client has
// ended: for each, the error that ended it, or "" when the server said the
// run is done (of several clients, each also logs its error as it ends).
// A client ends with an error when the server refuses it
// (another protocol version, a certificate of another client, an
// impossible claim), stays unreachable for give_up_s, or its work throws.
std::vector<std::string> RunGrpcClients(const std::vector<GrpcClientOptions>& clients,
                                        const std::vector<GrpcClientWork>& work, int workers);

// One client (RunGrpcClients of one, one worker); throws fedprof::Error
// with the error that ended it.
void RunGrpcClient(const GrpcClientOptions& options, const std::function<void(const ServerSetup& setup)>& prepare,
                   const std::function<FitResult(const FitInstructions&)>& fit);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_H_
