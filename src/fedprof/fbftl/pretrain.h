#ifndef FEDPROF_FBFTL_PRETRAIN_H_
#define FEDPROF_FBFTL_PRETRAIN_H_

#include "fedprof/data/dataset.h"
#include "fedprof/fbftl/options.h"

namespace fedprof {

class StagedModel;

// Trains `model` on `data` (`options`: SGD with momentum 0.9, minibatches in
// an order the seed gives) to serve as a source model for the transfer
// schemes, and returns its test accuracy on `test`, printing one line per
// epoch. Initialise the model first (StagedModel::Reinitialize for one
// trained from scratch).
double Pretrain(const PretrainOptions& options, StagedModel& model, const Dataset& data,
                const Dataset& test);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_PRETRAIN_H_
