#ifndef FEDPROF_CLIENT_LOCAL_TRAINING_H_
#define FEDPROF_CLIENT_LOCAL_TRAINING_H_

// Client::Fit's third step: local training on the client's data.

#include <cstdint>

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

// Runs train.epochs epochs of mini-batch SGD with momentum on `data`,
// starting from the parameters `model` holds. With objective.prox_mu > 0
// the objective adds FedProx's proximal term μ/2 ||w − w0||², w0 being those
// starting parameters. Returns the mean loss over the last epoch (0 with no
// epoch).
double TrainLocally(const TrainOptions& train, const LocalObjective& objective,
                    const BatchOrderKey& key, const Dataset& data, Model& model);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_LOCAL_TRAINING_H_
