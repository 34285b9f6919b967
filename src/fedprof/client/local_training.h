#ifndef FEDPROF_CLIENT_LOCAL_TRAINING_H_
#define FEDPROF_CLIENT_LOCAL_TRAINING_H_

// Client::Fit's third step: local training on the client's data.

#include <cstdint>
#include <memory>
#include <vector>

#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/data/dataset.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

class Model;

// Where a client's batch order comes from: (seed, round, client, epoch)
// alone, so a result never depends on which thread or rank trained it.
struct BatchOrderKey {
  uint64_t seed = 0;
  int64_t round = 0;
  int client_id = 0;
};

// The per-sample losses of the last local epoch, each taken on the batch it
// was trained in (0 with no epoch).
struct EpochLoss {
  double mean = 0;
  double rms = 0;  // sqrt of the mean squared loss: Oort's statistical utility / |B|
  int64_t steps = 0;  // optimiser steps taken, over every epoch
};

// Runs train.epochs epochs of mini-batch SGD with momentum on `data`,
// starting from the parameters `model` holds. Each batch's loss adds the
// `algorithms`' loss terms (FedProx's proximal term, FedDyn's), and each
// optimiser step is followed by their AfterStep (SCAFFOLD's correction).
EpochLoss TrainLocally(const TrainOptions& train, const BatchOrderKey& key, const Dataset& data, Model& model,
                       const std::vector<std::unique_ptr<LocalAlgorithm>>& algorithms = {});

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_LOCAL_TRAINING_H_
