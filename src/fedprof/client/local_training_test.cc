// Client::Fit's third step: local SGD, its batch order and FedProx's term.
#include "fedprof/client/local_training.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>

#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/models/models.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;
using testing_support::ParamDistance;

TrainOptions TwoEpochs() {
  TrainOptions t;
  t.epochs = 2;
  t.batch_size = 7;
  t.lr = 0.05;
  return t;
}

Dataset Data() {
  torch::manual_seed(8);
  return testing_support::DrawBlobs(25);
}

FlatParams Initial() {
  torch::manual_seed(4);
  return Flatten(*MakeModel(kBlobMlp));
}

struct Trained {
  FlatParams params;
  double loss = 0;
};

Trained Train(const TrainOptions& train, const LocalObjective& objective, const BatchOrderKey& key) {
  const std::shared_ptr<Model> model = MakeModel(kBlobMlp);
  Unflatten(Initial(), *model);
  Trained t;
  FitInstructions ins;
  ins.train = train;
  ins.objective = objective;
  t.loss = TrainLocally(train, key, Data(), *model, MakeLocalAlgorithms(ins, 0, *model, {})).mean;
  t.params = Flatten(*model);
  return t;
}

TEST(LocalTrainingTest, NoEpochLeavesTheModelAsItStarts) {
  TrainOptions none = TwoEpochs();
  none.epochs = 0;
  const Trained t = Train(none, LocalObjective(), {1, 1, 0});
  EXPECT_EQ(t.params, Initial());
  EXPECT_EQ(t.loss, 0);
}

TEST(LocalTrainingTest, TheBatchOrderKeyAloneDecidesTheResult) {
  const Trained a = Train(TwoEpochs(), LocalObjective(), {5, 2, 3});
  EXPECT_NE(a.params, Initial());
  EXPECT_GT(a.loss, 0);
  EXPECT_TRUE(std::isfinite(a.loss));
  const Trained again = Train(TwoEpochs(), LocalObjective(), {5, 2, 3});
  EXPECT_EQ(again.params, a.params);
  EXPECT_EQ(again.loss, a.loss);
  EXPECT_NE(Train(TwoEpochs(), LocalObjective(), {6, 2, 3}).params, a.params) << "seed";
  EXPECT_NE(Train(TwoEpochs(), LocalObjective(), {5, 3, 3}).params, a.params) << "round";
  EXPECT_NE(Train(TwoEpochs(), LocalObjective(), {5, 2, 4}).params, a.params) << "client";
}

TEST(LocalTrainingTest, TheProximalTermHoldsTrainingNearItsStart) {
  const BatchOrderKey key{5, 2, 3};
  const Trained plain = Train(TwoEpochs(), LocalObjective(), key);
  LocalObjective prox;
  prox.prox_mu = 20;
  const Trained held = Train(TwoEpochs(), prox, key);
  EXPECT_LT(ParamDistance(held.params, Initial()),
            ParamDistance(plain.params, Initial()));
  prox.keep_local_batch_norm = true;  // not training's concern
  EXPECT_EQ(Train(TwoEpochs(), prox, key).params, held.params);
}

}  // namespace
}  // namespace fedprof
