#ifndef FEDPROF_STRATEGY_STRATEGY_H_
#define FEDPROF_STRATEGY_STRATEGY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/selection/selector.h"

namespace fedprof {

class Config;

// A federated strategy: which clients train each round (a Selector) and how
// their results become the next global model (an Aggregator). Strategies see
// clients only through ClientInfo and FitResult, never whether they are
// simulated or remote, and keep per-client state indexed by client id
// (ids are 0 .. N-1; not every client need ever appear).
//
// The server calls, per run: OnGlobalModel(initial, 0) (or LoadState, then
// OnGlobalModel(global, round) on resume); then per round: Observe for the
// reports of available clients that HasReport says lack one (before round 1:
// everyone), ConfigureFit, CheckResult and Observe for each result as it
// arrives (results that fail CheckResult are not observed), AggregateFit,
// OnGlobalModel(next, round), LastScores and SaveState.
class Strategy {
 public:
  // A strategy that picks clients itself (overriding ConfigureFit) passes
  // a null selector.
  Strategy(std::string name, std::unique_ptr<Selector> selector,
           std::unique_ptr<Aggregator> aggregator);
  virtual ~Strategy() = default;

  const std::string& name() const { return name_; }

  // The clients to train this round, among context.clients.
  virtual std::vector<int> ConfigureFit(const SelectionContext& context, Rng& rng);

  // The next global model from the round's valid results, summed in `sum`.
  virtual void AggregateFit(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                            FlatParams* next);

  // What selected clients report besides their model: a profile of their
  // data, or the received model's loss on it. When anything is asked, the
  // server also collects a report from every client that has none (all of
  // them before round 1) and hands them to Observe.
  struct Reports {
    bool profile = false;
    bool loss = false;
    bool any() const { return profile || loss; }
  };
  virtual Reports WantedReports() const { return {}; }
  // Whether the strategy holds a usable report of client `id`.
  virtual bool HasReport(int id) const {
    (void)id;
    return true;
  }

  // > 0: clients return a count sketch of their update of this size.
  virtual int SketchDim() const { return 0; }

  // Adds what the strategy sends along with the current model (FedProf's
  // encrypted reference under secure matching) to a round's or a report's
  // instructions.
  virtual void ConfigureInstructions(FitInstructions* instructions) const { (void)instructions; }

  // μ of a proximal term in the clients' local objective (FedProx), or 0.
  double ProximalMu() const { return proximal_mu_; }
  void SetProximalMu(double mu) { proximal_mu_ = mu; }

  // Whether clients keep their own batch-norm layers (FedBN).
  bool KeepsLocalBatchNorm() const { return local_batch_norm_; }
  void SetKeepsLocalBatchNorm(bool keep) { local_batch_norm_ = keep; }

  // The global model of version `version` (0 = the initial model, then the
  // round that produced it), before each round and after each aggregation.
  virtual void OnGlobalModel(const FlatParams& global, int64_t version) {
    (void)global;
    (void)version;
  }

  // Why a result that passed the server's checks is still unusable (e.g. a
  // malformed profile), or "". A refused result is skipped for the round.
  virtual std::string CheckResult(const FitResult& result) const {
    (void)result;
    return "";
  }

  // Sees one valid result of a round (or a report), in any order.
  virtual void Observe(const FitResult& result) { (void)result; }

  // Per-client scores behind the last selection (one per client id), or
  // empty if the strategy does not score clients.
  virtual std::vector<double> LastScores() const { return {}; }

  // Opaque state for checkpoints; LoadState(SaveState()) restores it. The
  // base class saves its aggregator's state. LoadState throws
  // fedprof::Error when the state does not fit this strategy.
  virtual std::string SaveState() const;
  virtual void LoadState(const std::string& state);

 private:
  std::string name_;
  double proximal_mu_ = 0;
  bool local_batch_norm_ = false;
  std::unique_ptr<Selector> selector_;
  std::unique_ptr<Aggregator> aggregator_;
};

AggregationMode ParseAggregationMode(const std::string& name);

// What some strategies need beyond the config.
struct StrategyContext {
  int num_clients = 0;
  // RP_V on the reference set for a global model of a version (FedProf).
  std::function<Profile(const FlatParams& global, int64_t version)> reference_profile;
};

// The strategy named by `strategy.name`, with its options from `config`.
std::unique_ptr<Strategy> MakeStrategy(const Config& config, const StrategyContext& context);

}  // namespace fedprof

#endif  // FEDPROF_STRATEGY_STRATEGY_H_
