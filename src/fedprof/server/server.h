#ifndef FEDPROF_SERVER_SERVER_H_
#define FEDPROF_SERVER_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/client/client.h"
#include "fedprof/core/params.h"
#include "fedprof/report/metrics.h"

namespace fedprof {

class ModelReplicas;
class Strategy;
class Transport;

struct ServerOptions {
  int64_t rounds = 50;
  double fraction = 0.1;  // C
  TrainOptions train;     // train.lr is the round-1 learning rate
  double lr_decay = 1.0;  // per round
  uint64_t seed = 1;
  int64_t eval_every = 1;
  int64_t eval_batch_size = 128;
  bool progress = true;
};

// Everything a run needs to continue exactly where it stopped.
struct ServerState {
  int64_t round = 0;  // rounds completed
  FlatParams global;
  std::vector<int64_t> times_selected;  // per client
  std::vector<RoundMetrics> history;
  double virtual_time_s = 0;
  double energy_j = 0;
  std::string strategy_state;  // Strategy::SaveState() after the last round
  std::string client_states;   // state clients keep between rounds (simulation)
};

// Virtual time and device energy of one round for the selected clients
// (simulation: the cost model; a deployment may leave it unset).
struct RoundCost {
  double time_s = 0;
  double energy_j = 0;
  double profiling_time_s = 0;  // included in time_s
  double profiling_energy_j = 0;  // included in energy_j
};
using RoundCostFn = std::function<RoundCost(const std::vector<int>& selected)>;

// The round loop: select, send θ, collect, validate, aggregate, evaluate.
class Server {
 public:
  // `evaluator` (copies of the model) and `test` serve the per-round
  // evaluation.
  Server(const ServerOptions& options, Transport& transport, Strategy& strategy,
         ModelReplicas& evaluator, const Dataset& test, RoundCostFn cost);

  // Runs rounds state.round + 1 .. options.rounds, calling `on_round` after
  // each (to write outputs and checkpoints). A fresh state (round 0) first
  // shows the strategy the initial model and, if it wants profiles, collects
  // one from every client (Alg. 2 lines 4-6); a resumed one restores the
  // strategy from state.strategy_state. `wall_offset_s` is the wall time
  // already spent before a resume.
  void Run(ServerState& state, const std::function<void(ServerState&)>& on_round,
           double wall_offset_s = 0);

  // K = max(1, round(N * C)).
  int ClientsPerRound() const;

  // Why a result must be refused, or "" if it is usable.
  static std::string Validate(const FitResult& result, size_t num_params);

 private:
  // The results that pass Validate and the strategy's CheckResult; the rest
  // are logged with their reason and counted in *skipped.
  std::vector<const FitResult*> Usable(int64_t round, const std::vector<FitResult>& results,
                                       size_t num_params, int* skipped) const;

  ServerOptions options_;
  Transport& transport_;
  Strategy& strategy_;
  ModelReplicas& evaluator_;
  const Dataset& test_;
  RoundCostFn cost_;
};

}  // namespace fedprof

#endif  // FEDPROF_SERVER_SERVER_H_
