#ifndef FEDPROF_FBFTL_PRETRAIN_H_
#define FEDPROF_FBFTL_PRETRAIN_H_

#include <cstdint>

#include "fedprof/config/run_options.h"
#include "fedprof/data/dataset.h"

namespace fedprof {

class StagedModel;

// Trains `model` on `data` (pretrain.*: SGD with momentum 0.9, minibatches
// in an order drawn from the run's `seed`) to serve as a source model for the
// transfer schemes, and returns its test accuracy on `test`, printing one line per
// epoch. Initialise the model first (StagedModel::Reinitialize for one
// trained from scratch).
double Pretrain(const RunOptions::Pretrain& options, uint64_t seed, StagedModel& model,
                const Dataset& data, const Dataset& test);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_PRETRAIN_H_
