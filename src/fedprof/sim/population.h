#ifndef FEDPROF_SIM_POPULATION_H_
#define FEDPROF_SIM_POPULATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/client/attack.h"
#include "fedprof/client/client.h"
#include "fedprof/config/run_options.h"
#include "fedprof/data/dataset.h"
#include "fedprof/data/feature_scaling.h"
#include "fedprof/data/quality.h"

namespace fedprof {

struct TrainTest {
  Dataset train;    // what the clients share out
  Dataset test;
  Dataset holdout;  // data.holdout_share of the training set, kept on the server
  // Tabular data: the scaling train and test went through, which a
  // deployed client's own table goes through too.
  FeatureScaling features;
};

// Loads the training and test sets named by the data.* options (applying
// data.train_limit / data.test_limit, then setting aside a data.holdout_share
// of the training set drawn from `seed`). Tabular features are
// standardised with the training set's column means and standard deviations
// (`features`), the test file's columns taken by name.
TrainTest LoadData(const RunOptions::Data& options, uint64_t seed);

// The scaling of a training table `x` [n, features] with columns `names`.
FeatureScaling FeatureScalingOf(const at::Tensor& x, const std::vector<std::string>& names);

// `x` [n, names.size()], columns `names` as read from `what`, put in the
// scaling's column order and standardised. Throws, naming both lists of
// columns, unless `names` are the scaling's in some order.
at::Tensor ScaleFeatures(const at::Tensor& x, const std::vector<std::string>& names, const FeatureScaling& scaling,
                         const std::string& what);

// Where a named data set lives when data.dir is empty: $FEDPROF_DATA/<name>,
// then data/<name> under the working directory, then data/<name> in the
// nearest of the four directories above the code's file (the fedprof
// binary, or the Python extension: the repository's data/ for both);
// Fashion-MNIST defaults to Debian's /usr/share/datasets/fashion-mnist.
std::string DefaultDataDir(const std::string& name);

// The simulated clients of a config: who holds which samples of `train`
// (partition.*), of which data kind (quality.*). The same seed gives the
// same clients, data kinds and noise, so a client process given only the
// config holds exactly the data of simulated client k. With the disjoint
// partitions (iid, dominant) the index sets are computed up front (one
// index per sample of the data set); with the sampled ones client k's
// samples are drawn from its seed when asked for, so a population costs a
// few bytes per client whatever its size. Thread-safe once built.
class Population {
 public:
  // Keeps a reference to `train` (tensors share storage). Reads seed,
  // clients, partition, quality and attack. Throws fedprof::Error naming the
  // option when they cannot be met.
  Population(const Dataset& train, const RunOptions& options);
  ~Population();

  int size() const { return static_cast<int>(kinds_.size()); }
  int64_t num_samples(int k) const { return sizes_.at(k); }
  // How client k's data is degraded (quality.*): a fact of the simulation,
  // for clients.csv and summaries; the client itself never knows it.
  DataKind kind(int k) const { return kinds_.at(k); }
  // Whether client data is drawn when needed (sampled partitions): then
  // clients are cheap to describe and should not all be kept.
  bool on_demand() const { return sampled_ != nullptr; }

  // The samples of each class the partition gave client k (before quality.*
  // and attack.* change any label); empty for regression data.
  std::vector<int64_t> LabelCounts(int k) const;

  // Client k holding its own copy of its samples, degraded by its kind and
  // by quality.feature_skew, and attacking when the attack.* options make it
  // an attacker.
  Client MakeClient(int k) const;

  // Inputs that many clients hold alike under the sampled partitions: the
  // training set as it is (clean clients), blurred (quality.blurred: the
  // blur is deterministic and per image) and the irrelevant clients' source
  // set (quality.irrelevant_source). A table serves only when its clients
  // together hold at least as many samples as it has rows: computing its
  // rows once then costs no more than the clients' own passes. Refers to
  // this population.
  InputTables SharedTables() const;
  // Whether client k's inputs are rows of a table of SharedTables() that
  // serves; `rows` then says which, in order: MakeClient(k).data().x is
  // exactly those rows.
  bool SharedRowsOf(int k, TableRows* rows) const;

 private:
  Dataset train_;
  uint64_t seed_;
  RunOptions::Quality quality_;
  Dataset irrelevant_source_;
  std::vector<DataKind> kinds_;
  AttackPlan attacks_;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> labels_;                      // of train_, for LabelCounts
  std::vector<std::vector<int64_t>> parts_;           // disjoint partitions
  std::unique_ptr<class SampledPartition> sampled_;  // sampled partitions
  // The tables of SharedTables(), and whether each serves.
  enum Table { kAsIs, kBlurred, kIrrelevantSource, kTables };
  bool serves_[kTables] = {};

  // quality.feature_skew * k / N: client k's feature-skew noise.
  double FeatureSkewSigma(int k) const;
  // The table client k's inputs are rows of, or -1 when they are its own.
  int TableOf(int k) const;
};

}  // namespace fedprof

#endif  // FEDPROF_SIM_POPULATION_H_
