#ifndef FEDPROF_AGGREGATION_AGGREGATOR_H_
#define FEDPROF_AGGREGATION_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "fedprof/client/client.h"
#include "fedprof/core/params.h"

namespace fedprof {

enum class AggregationMode {
  // w = sum over all N clients of |D_k|/|D| w_k, where clients that did not
  // train this round contribute the current global model (000, Eq. 8).
  kFull,
  // w = sum over the selected clients of |D_k|/|D_S| w_k.
  kPartial,
};

// Builds the next global model from this round's (valid) client results.
class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // `results` are in a fixed order (by selection), so the floating-point sum
  // order never depends on scheduling. total_samples = |D| over all clients.
  virtual void Aggregate(const FlatParams& global, const std::vector<const FitResult*>& results,
                         int64_t total_samples, FlatParams* next) = 0;
};

std::unique_ptr<Aggregator> MakeWeightedAverage(AggregationMode mode);

// The pure averaging rules, for reuse by other aggregators. `next` may alias
// `global`. With no results both return the global model unchanged.
void AverageFull(const FlatParams& global, const std::vector<const FitResult*>& results,
                 int64_t total_samples, FlatParams* next);
void AveragePartial(const FlatParams& global, const std::vector<const FitResult*>& results,
                    FlatParams* next);

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_AGGREGATOR_H_
