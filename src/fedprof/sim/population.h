#ifndef FEDPROF_SIM_POPULATION_H_
#define FEDPROF_SIM_POPULATION_H_

#include <string>
#include <vector>

#include "fedprof/client/client.h"
#include "fedprof/data/dataset.h"

namespace fedprof {

class Config;

struct TrainTest {
  Dataset train;    // what the clients share out
  Dataset test;
  Dataset holdout;  // data.holdout_share of the training set, kept on the server
};

// Loads the training and test sets named by the data.* options (applying
// data.train_limit / data.test_limit, then setting aside a seeded
// data.holdout_share of the training set). Tabular features are
// standardised with the training set's column means and standard deviations.
TrainTest LoadData(const Config& config);

// Where a named data set lives when data.dir is empty: $FEDPROF_DATA/<name>,
// then data/<name> under the working directory, then under the directory
// above the executable's; Fashion-MNIST defaults to Debian's
// /usr/share/datasets/fashion-mnist.
std::string DefaultDataDir(const std::string& name);

// Splits `train` among clients.count clients (partition.*) and degrades the
// data of the clients picked by quality.* — the same seed gives the same
// clients, data kinds and noise.
std::vector<Client> BuildClients(const Dataset& train, const Config& config);

}  // namespace fedprof

#endif  // FEDPROF_SIM_POPULATION_H_
