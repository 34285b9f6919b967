#ifndef FEDPROF_STRATEGY_STRATEGY_H_
#define FEDPROF_STRATEGY_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/selection/selector.h"

namespace fedprof {

class Config;

// A federated strategy: which clients train each round (a Selector) and how
// their results become the next global model (an Aggregator). Strategies see
// clients only through ClientInfo and FitResult, never whether they are
// simulated or remote.
class Strategy {
 public:
  Strategy(std::string name, std::unique_ptr<Selector> selector,
           std::unique_ptr<Aggregator> aggregator);
  virtual ~Strategy() = default;

  const std::string& name() const { return name_; }

  // The clients to train this round.
  virtual std::vector<int> ConfigureFit(const SelectionContext& context, Rng& rng);

  // The next global model from the round's valid results.
  virtual void AggregateFit(const FlatParams& global, const std::vector<const FitResult*>& results,
                            int64_t total_samples, FlatParams* next);

 private:
  std::string name_;
  std::unique_ptr<Selector> selector_;
  std::unique_ptr<Aggregator> aggregator_;
};

AggregationMode ParseAggregationMode(const std::string& name);

// The strategy named by `strategy.name`, with its options from `config`.
std::unique_ptr<Strategy> MakeStrategy(const Config& config);

}  // namespace fedprof

#endif  // FEDPROF_STRATEGY_STRATEGY_H_
