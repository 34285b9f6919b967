#ifndef FEDPROF_STRATEGY_STRATEGY_H_
#define FEDPROF_STRATEGY_STRATEGY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/algorithms/algorithm.h"
#include "fedprof/aggregation/dp_fedavg.h"
#include "fedprof/aggregation/robust.h"
#include "fedprof/config/run_options.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/report/metrics.h"
#include "fedprof/selection/selector.h"

namespace fedprof {

class RunObserver;

// What the server fixes for one call's instructions; the strategy fills in
// the rest for each client (what to report, the local objective).
struct TaskSetup {
  int64_t round = 0;
  std::shared_ptr<const FlatParams> global;  // θ, shared by every client's instructions
  int64_t model_version = 0;
  TrainOptions train;  // the round's (learning rate decayed)
  uint64_t seed = 0;
};

// A federated strategy: a Selector (which clients train each round, and
// everything it keeps of them), an Aggregator (how their results become the
// next global model) and what clients do locally (FedProx's proximal term,
// FedBN's local batch norm). Any selector combines with any aggregator.
// Strategies see clients only through ClientInfo and FitResult, never
// whether they are simulated or remote.
//
// The server calls, per run: OnGlobalModel(initial, 0) (or LoadState, then
// OnGlobalModel(global, round) on resume); then per round: ConfigureReports
// for the available clients that HasReport says lack a report (before round
// 1: everyone) and Observe for their reports, ConfigureFit, CheckResult,
// BoundUpdate and Observe for each result as it arrives (results that fail
// CheckResult or BoundUpdate are not observed), AggregateFit,
// OnGlobalModel(next, round), LastScores and SaveState. The client-facing
// hooks are the selector's (selection/selector.h).
class Strategy {
 public:
  using Reports = Selector::Reports;

  // Neither part may be null.
  Strategy(std::string name, std::unique_ptr<Selector> selector,
           std::unique_ptr<Aggregator> aggregator);

  const std::string& name() const { return name_; }
  Selector& selector() { return *selector_; }
  Aggregator& aggregator() { return *aggregator_; }

  // The clients to train this round, among context.clients, in increasing
  // id order, each with its instructions (as Flower's configure_fit pairs
  // clients with their FitIns): setup's training, the local objective
  // (FedProx's μ, FedBN's local batch norm) and the reports the selector
  // wants of that client.
  std::vector<ClientInstructions> ConfigureFit(const SelectionContext& context, Rng& rng,
                                               const TaskSetup& setup);
  // What ConfigureFit tells client `client_id` under `setup` (a resumed
  // asynchronous run rebuilds the tasks still training with it).
  FitInstructions TrainingInstructions(int client_id, const TaskSetup& setup) const;
  // Report-only instructions (train.epochs = 0) for `client_ids`, clients
  // the strategy holds no report of.
  std::vector<ClientInstructions> ConfigureReports(const std::vector<int>& client_ids,
                                                   const TaskSetup& setup) const;

  // The next global model from the round's valid results, summed in `sum`
  // and, when the aggregator NeedsUpdates, kept one by one in `updates`.
  void AggregateFit(const FlatParams& global, const ModelSum& sum,
                    const std::vector<ClientUpdate>& updates, int64_t total_samples,
                    FlatParams* next) {
    if (aggregator_->NeedsUpdates()) {
      aggregator_->AggregateUpdates(global, updates, total_samples, next);
    } else {
      aggregator_->Aggregate(global, sum, total_samples, next);
    }
  }
  void AggregateFit(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                    FlatParams* next) {
    AggregateFit(global, sum, {}, total_samples, next);
  }
  bool NeedsUpdates() const { return aggregator_->NeedsUpdates(); }
  // Buffered asynchronous aggregation (aggregation/fedbuff.h): its options,
  // or null for synchronous rounds; and its step from a full buffer.
  const FedBuffOptions* Buffered() const { return aggregator_->Buffered(); }
  void AggregateBuffer(const FlatParams& global, const std::vector<BufferedUpdate>& buffer,
                       int64_t total_samples, FlatParams* next) {
    aggregator_->AggregateBuffer(global, buffer, total_samples, next);
  }

  // The bound on each update's norm (robust.max_update_norm), applied to a
  // result that passed CheckResult: "" when it is usable (its model maybe
  // clipped), else why it is refused.
  // Under user-level DP also the round's clip norm, which the client must
  // have applied (refused, not clipped, when it did not).
  std::string BoundUpdate(const FlatParams& global, FitResult* result) const;
  void SetUpdateNormBound(const UpdateNormBound& bound) { norm_bound_ = bound; }
  // Whether BoundUpdate ever changes or refuses a model.
  bool BoundsUpdates() const { return norm_bound_.max_ratio > 0; }
  // Why this strategy cannot aggregate models that arrive only summed (a
  // relay's partial sums), or "": robust rules and the update-norm bound need
  // every model.
  std::string NeedsEveryModel() const {
    if (NeedsUpdates()) return "its aggregation rule needs every client's model (strategy.aggregator)";
    if (dp_ && !dp_->options().distributed) {
      return "it checks that every client clipped its update (dp.mode = central)";
    }
    if (BoundsUpdates()) return "it bounds every client's update (robust.max_update_norm)";
    if (Buffered()) return "it weighs each client's model by its staleness (strategy.aggregator = fedbuff)";
    const std::string& algorithm = algorithm_objective_.algorithm;
    const AlgorithmName* a = FindAlgorithm(algorithm);
    if (a != nullptr && a->reads == ServerReads::kEach) {
      return "its client algorithm needs each client's " + std::string(a->each_read) +
             " (strategy.algorithm = " + algorithm + ")";
    }
    return "";
  }

  // Federated evaluation (eval.federated_every). The clients asked to
  // evaluate the global model on their own data, with their instructions:
  // context.num_to_select of context.clients, uniformly at random.
  std::vector<ClientInstructions> ConfigureEvaluate(const SelectionContext& context, Rng& rng,
                                                    const TaskSetup& setup) const;
  // The round's federated figures from the clients' evaluations (in client
  // order): the aggregator's (Aggregator::AggregateEvaluations), or each
  // weighted by its sample count: accuracy = Σ correct / Σ samples, loss =
  // Σ samples·loss / Σ samples (summed exactly: order never matters).
  struct Evaluation {
    int clients = 0;
    double accuracy = 0;
    double loss = 0;
  };
  Evaluation AggregateEvaluate(int64_t round, const std::vector<ClientEvaluation>& evaluations) const;

  Reports WantedReports() const { return selector_->WantedReports(); }
  bool HasReport(int id) const { return selector_->HasReport(id); }
  bool DrawsByRank() const { return selector_->DrawsByRank(); }
  int SketchDim() const { return selector_->SketchDim(); }
  bool NeedsTrainingLoss() const { return selector_->NeedsTrainingLoss(); }
  void OnGlobalModel(const FlatParams& global, int64_t version) {
    selector_->OnGlobalModel(global, version);
    if (dp_) dp_->SetModelSize(global.size());
    aggregator_->OnGlobalModel(version);
  }
  void OnEarlierModel(const FlatParams& model, int64_t version) { selector_->OnEarlierModel(model, version); }
  std::string CheckResult(const FitResult& result) const { return selector_->CheckResult(result); }
  void Observe(const FitResult& result) {
    selector_->Observe(result);
    if (dp_ && !result.params.empty()) dp_->Observe(result.within_clip);
  }
  // A usable training result's weight in the round's sum: its sample count,
  // or 1 under user-level DP (DP-FedAvg fixes the weights; a claim is no
  // bounded contribution).
  int64_t AggregationWeight(const FitResult& result) const { return dp_ ? 1 : result.num_samples; }
  // User-level DP's aggregator (dp.mode = central), or null.
  const DpFedAvg* Dp() const { return dp_; }
  // Whether the last AggregateFit took the server's own step (Aggregator::FellBack).
  bool FellBack() const { return aggregator_->FellBack(); }
  std::vector<double> LastScores() const { return selector_->LastScores(); }

  // μ of a proximal term in the clients' local objective (FedProx), or 0.
  double ProximalMu() const { return proximal_mu_; }
  void SetProximalMu(double mu) { proximal_mu_ = mu; }

  // Whether clients keep their own batch-norm layers (FedBN).
  bool KeepsLocalBatchNorm() const { return local_batch_norm_; }
  void SetKeepsLocalBatchNorm(bool keep) { local_batch_norm_ = keep; }

  // The client algorithm (algorithms/algorithm.h): its options, sent in
  // every training task's objective, and its server half (null: none).
  // MakeStrategy sets the options; the run's plan adds the server half
  // (algorithms/algorithm.h: MakeServerAlgorithm, with the client halves).
  const LocalObjective& AlgorithmObjective() const { return algorithm_objective_; }
  void SetAlgorithmObjective(const LocalObjective& objective) { algorithm_objective_ = objective; }
  void SetServerAlgorithm(std::unique_ptr<ServerAlgorithm> server_half) { algorithm_ = std::move(server_half); }
  ServerAlgorithm* Algorithm() const { return algorithm_.get(); }

  // Opaque state for checkpoints; LoadState(SaveState()) restores it: the
  // aggregator's state as it is when the selector keeps none, else the
  // selector's JSON object with the aggregator's state under "aggregator".
  // LoadState throws fedprof::Error when the state does not fit.
  std::string SaveState() const;
  void LoadState(const std::string& state);

 private:
  // Setup's fields and the reports the selector wants of `client_id`.
  FitInstructions InstructionsFor(int client_id, const TaskSetup& setup) const;
  // The selector's and the aggregator's state (SaveState without the
  // client algorithm's), and back.
  std::string PartsState() const;
  void LoadPartsState(const std::string& state);

  std::string name_;
  double proximal_mu_ = 0;
  bool local_batch_norm_ = false;
  UpdateNormBound norm_bound_;
  LocalObjective algorithm_objective_;  // its algorithm fields only
  std::unique_ptr<ServerAlgorithm> algorithm_;
  std::unique_ptr<Selector> selector_;
  std::unique_ptr<Aggregator> aggregator_;
  DpFedAvg* dp_ = nullptr;  // aggregator_ itself when it is DP-FedAvg
};

AggregationMode ParseAggregationMode(const std::string& name);

// What the options compose: strategy.name is a preset of a selector, an
// aggregator and a local objective; strategy.selector, strategy.aggregator
// and train.proximal_mu, when not empty, override the preset's.
struct StrategySpec {
  std::string preset;      // strategy.name
  std::string selector;    // uniform | size | fedprof | afl | cfcfm | clustered
  std::string aggregator;  // average | fedadam | fedbn | median | ... | fltrust (kAggregators)
  AggregationMode mode = AggregationMode::kFull;
  double proximal_mu = 0;
  std::string algorithm;    // the client algorithm; "" = plain SGD
  bool overridden = false;  // some override changed the preset

  // The preset's name when nothing overrode it, else
  // "selector+aggregator", with "+prox" when μ > 0 and "+algorithm".
  std::string Label() const;
};

// The composition the options ask for (strategy.*, fedprox.mu,
// train.proximal_mu). Throws fedprof::Error naming the option for an
// unknown preset.
StrategySpec ResolveStrategy(const RunOptions& options);

// What some strategies need beyond the config.
struct StrategyContext {
  int num_clients = 0;
  // RP_V on the reference set for a global model of a version (FedProf).
  std::function<Profile(const FlatParams& global, int64_t version)> reference_profile;
  // Hears of the time secure matching takes (FedProf); null: nobody.
  RunObserver* observer = nullptr;
  // FLTrust's root update w_0: the server's own training of θ (of a version)
  // on its root data set; null where the run has none.
  RootUpdate root_update;
  // Zeno's L_V: the server's loss of a model on the validation batch of the
  // round that starts from a version; null where the run has none.
  ValidationLoss validation_loss;
};

// The options of user-level DP (the dp section) as DP-FedAvg takes them,
// with N = clients.count and K = clients_per_round(); a keyed server's key
// is read where it draws noise (MakeStrategy), not here.
DpFedAvgOptions DpOptionsFrom(const RunOptions& options);
// The directory of the DP noise keys (dp.key_dir), or an error saying none
// was given.
std::string KeyDir(const RunOptions::Dp& dp);

// The strategy the options compose (ResolveStrategy), its parts configured
// by their sections (fedprof, afl, clustered, fedadam, robust, dp).
std::unique_ptr<Strategy> MakeStrategy(const RunOptions& options, const StrategyContext& context);

// What the strategy of `options` reads of a client beside its model: its
// selector's reports, training loss and sketch, and federated evaluation.
// A deployed client holds its server to its own config's (SecAggPolicy).
ClientReads StrategyReads(const RunOptions& options);

}  // namespace fedprof

#endif  // FEDPROF_STRATEGY_STRATEGY_H_
