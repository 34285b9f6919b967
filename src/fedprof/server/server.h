#ifndef FEDPROF_SERVER_SERVER_H_
#define FEDPROF_SERVER_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/params.h"
#include "fedprof/privacy/noise_source.h"
#include "fedprof/protocol/messages.h"
#include "fedprof/report/metrics.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

class ModelReplicas;
class PhaseTimer;
class RunObserver;
class Strategy;
struct Dataset;

// The round loop's options. Not one section but a merge of several (rounds,
// seed, strategy.fraction, train.*, eval.*, report.progress and, with the
// clients elsewhere, the deploy.* quorum), with `train` in the wire's terms:
// a run's are made by ServerOptionsFrom (run/plan.h) alone; tests and
// benchmarks set them directly.
struct ServerOptions {
  int64_t rounds = 50;
  double fraction = 0.1;  // C
  TrainOptions train;     // train.lr is the round-1 learning rate
  double lr_decay = 1.0;  // per round
  uint64_t seed = 1;
  int64_t eval_every = 1;
  int64_t eval_batch_size = 128;
  bool progress = true;
  // Quorum: a round with fewer usable results than this is run again with
  // a fresh selection, at most `round_attempts` times in all; then the run
  // stops with an error (its checkpoint holds the last completed round).
  // 0 = no quorum: a round with no usable result keeps the global model.
  int min_results = 0;
  int round_attempts = 3;
  // Federated evaluation: every this many rounds (and the last; 0 = never)
  // this share of the available clients evaluates the global model on its
  // own data (Strategy::ConfigureEvaluate / AggregateEvaluate).
  int64_t federated_eval_every = 0;
  double federated_eval_fraction = 0.1;
  // Over-commitment (availability.overcommit): a round asks ceil(overcommit
  // K) clients; the transport keeps the first K to finish.
  double overcommit = 1;
  // Where each round's sample comes from: (seed, round), or under user-level
  // DP the server's noise source (dp.noise), so that the amplification by
  // sampling holds against whoever knows the config.
  NoiseSource sample_source;
  // Whether the clients' training losses reach the server (not under secure
  // aggregation, unless the strategy needs them): if not, metrics.csv's
  // train_loss is nan.
  bool train_loss_reported = true;
};

// A client still training in an asynchronous run (strategy.aggregator =
// fedbuff), as a checkpoint keeps it: a resumed run trains it again from
// these, which gives the same result (a task depends on its instructions
// alone).
struct TrainingTask {
  int client_id = -1;
  int64_t version = 0;   // v: the model version it trains on
  int64_t dispatch = 0;  // the dispatch that started it: its instructions' round
  double start_s = 0;    // virtual time
};

// Everything a run needs to continue exactly where it stopped.
struct ServerState {
  int64_t round = 0;  // rounds completed
  FlatParams global;
  std::vector<int64_t> times_selected;  // per client id
  std::vector<RoundMetrics> history;
  double virtual_time_s = 0;
  double energy_j = 0;
  std::string strategy_state;  // Strategy::SaveState() after the last round
  // Transport::SaveState() after the last round: simulated clients' local
  // state (FedBN), a deployment's registered sample counts.
  std::string transport_state;
  std::string model_sha256;    // model.file's SHA-256 when the run trains one, else empty
  // Asynchronous runs: the dispatches so far, the clients training, and the
  // models of the versions before `round` that they train on.
  int64_t dispatches = 0;
  std::vector<TrainingTask> training;
  std::map<int64_t, FlatParams> training_models;
};

// Most samples a client may claim: its claim is its aggregation weight, which
// no server can verify, so it is bounded.
constexpr int64_t kMaxClaimedSamples = kMaxModelSumWeight;

// The round loop: select, send θ, fold each result into the aggregate as it
// arrives, aggregate, evaluate. The same over every transport.
class Server {
 public:
  // `evaluator` (copies of the model) and `test` serve the per-round
  // evaluation. `observer` (null: none) hears of the run's rounds, phases
  // and results (core/run_observer.h).
  Server(const ServerOptions& options, Transport& transport, Strategy& strategy,
         ModelReplicas& evaluator, const Dataset& test, RunObserver* observer = nullptr);

  // Evaluates a backdoor's success on `triggered` (client/backdoor.h's
  // TriggeredTestSet) with every central evaluation; it must outlive the run.
  void EvaluateBackdoorOn(const Dataset& triggered) { triggered_ = &triggered; }

  // Runs rounds state.round + 1 .. options.rounds, calling `on_round` after
  // each (to write outputs and checkpoints). A fresh state (round 0) first
  // shows the strategy the initial model; a resumed one restores the
  // strategy from state.strategy_state. Before each round, available
  // clients the strategy holds no report of are asked for one (Alg. 2
  // lines 4-6: before round 1, every client). `wall_offset_s` is the wall
  // time already spent before a resume. Throws fedprof::Error when a round
  // misses its quorum `round_attempts` times. With a buffered aggregator
  // (strategy.aggregator = fedbuff) the rounds are its server steps, run
  // asynchronously (RunBuffered).
  void Run(ServerState& state, const std::function<void(ServerState&)>& on_round,
           double wall_offset_s = 0);

  // K = max(1, round(N * C)), N = the transport's client count.
  int ClientsPerRound() const;

  // Why a result must be refused, or "" if it is usable: a failed client, a
  // sample count outside [1, kMaxClaimedSamples], any number that is not
  // finite (losses, profile, sketch, cost; a negative variance too), an
  // out-of-range loss, and when `expect_model` a model of the wrong size or
  // with a value that is not finite or beyond aggregation's range.
  static std::string Validate(const FitResult& result, size_t num_params, bool expect_model);
  // Why a result's profile is unusable, or "": one made with another model
  // version than `sent`, the version the server sent that client.
  static std::string CheckProfileVersion(const FitResult& result, int64_t sent);
  // Why a federated evaluation that passed Validate is unusable, or "": it
  // must cover all the client's samples (its weight), count at most that
  // many correct answers and report a finite, non-negative loss.
  static std::string ValidateEvaluation(const FitResult& result);

  // The last round's federated evaluations, by client id (empty when none ran).
  const std::vector<ClientEvaluation>& LastEvaluations() const { return evaluations_; }

 private:
  struct Tally;
  class ResultFold;
  class BufferedRun;
  // Run's asynchronous form (aggregation/fedbuff.h, docs/fedbuff.md): up to
  // fedbuff.concurrency clients train at once, each on the model version it
  // received; a client that finishes frees its place for one the selector
  // picks among the idle online clients; every fedbuff.buffer usable
  // results make one server step, a round of metrics and a checkpoint.
  // Events are ordered by the cost model's virtual time, ties by client id:
  // the results of one instant all arrive before its free places refill.
  void RunBuffered(ServerState& state, const std::function<void(ServerState&)>& on_round,
                   double wall_offset_s);
  // The learning rate of round (or step) `round`'s training: train.lr x
  // lr_decay^(round - 1).
  double LearningRate(int64_t round) const;
  // Why a training result is unusable, or "" (its update may be clipped):
  // Validate, a profile of another version than `version`, a model that
  // comes only summed to a strategy that needs each, the strategy's checks
  // and its bound on the update from `sent`, the model the client got.
  std::string CheckTrained(FitResult* result, const FlatParams& sent, int64_t version) const;
  // Checks a resumed state against the transport's clients and shows the
  // strategy its state and the global model.
  void Resume(ServerState& state);
  // Selects and trains round `round` at learning rate `lr`, selecting more
  // clients while it misses the quorum, into sum_, updates_ and `tally`;
  // returns |D|, the samples of the clients available when it started, or
  // nothing when the DP ledger stops the run before anyone trains.
  std::optional<int64_t> TrainRound(int64_t round, double lr, ServerState& state, PhaseTimer* phase,
                                    Tally* tally);
  // One attempt at a round: sends each selected client its instructions and
  // folds each usable result into sum_ and the tally; `global` is θ.
  void TrainSelected(int64_t round, const std::vector<ClientInstructions>& selected,
                     const FlatParams& global, Tally* tally);
  // The test-set and federated evaluations of round `round` into `m`.
  void EvaluateRound(int64_t round, const FlatParams& global, RoundMetrics* m);
  // Federated evaluation of round `round`'s global model into `m`.
  void EvaluateFederated(int64_t round, const FlatParams& global, RoundMetrics* m);
  // The round's progress line.
  void LogRound(const RoundMetrics& m) const;
  // Reports of the available clients the strategy lacks one of, under the
  // global model of `version`.
  void CollectReports(const std::vector<ClientInfo>& available, const FlatParams& global,
                      int64_t version);

  ServerOptions options_;
  Transport& transport_;
  Strategy& strategy_;
  ModelReplicas& evaluator_;
  const Dataset& test_;
  const Dataset* triggered_ = nullptr;  // EvaluateBackdoorOn
  RunObserver* const observer_;
  ModelSum sum_;  // reused across rounds
  std::vector<ClientEvaluation> evaluations_;
  // The round's accepted models, kept only for an aggregator that
  // NeedsUpdates (robust rules).
  std::vector<ClientUpdate> updates_;
};

}  // namespace fedprof

#endif  // FEDPROF_SERVER_SERVER_H_
