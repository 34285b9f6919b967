#include "fedprof/client/client.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <vector>

#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/protocol/sketch.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;
using testing_support::ParamDistance;

// 24 samples of two Gaussian blobs in 4 dimensions.
Client BlobClient(int id = 3) {
  torch::manual_seed(21);
  return Client(id, testing_support::DrawBlobs(24));
}

FitInstructions Instructions(const ModelSpec& spec = kBlobMlp) {
  torch::manual_seed(5);
  FitInstructions ins;
  ins.round = 2;
  ins.model_version = 1;
  ins.global = std::make_shared<const FlatParams>(Flatten(*MakeModel(spec)));
  ins.train.epochs = 2;
  ins.train.batch_size = 5;
  ins.train.lr = 0.05;
  ins.seed = 11;
  return ins;
}

FitResult FitOnFreshModel(Client& client, const FitInstructions& ins,
                          const ModelSpec& spec = kBlobMlp) {
  torch::manual_seed(999);  // the scratch model's own values must not matter
  const std::shared_ptr<Model> model = MakeModel(spec);
  return client.Fit(ins, *model);
}

TEST(ClientTest, AReportReturnsNoModelAndWhatWasAskedFor) {
  Client client = BlobClient();
  FitInstructions ins = Instructions();
  ins.train.epochs = 0;

  ins.report.profile = true;
  const FitResult profiled = FitOnFreshModel(client, ins);
  EXPECT_TRUE(profiled.ok);
  EXPECT_EQ(profiled.client_id, 3);
  EXPECT_EQ(profiled.num_samples, 24);
  EXPECT_TRUE(profiled.params.empty());
  EXPECT_TRUE(profiled.sketch.empty());
  ASSERT_TRUE(profiled.profile.has_value());
  EXPECT_EQ(profiled.profile->version, 1);
  EXPECT_EQ(profiled.profile->mean.size(), 8u) << "the MLP's first hidden layer";
  EXPECT_EQ(profiled.pre_train_loss, 0) << "no loss asked for";
  // The profile is of θ as sent, not of the scratch model's values.
  const std::shared_ptr<Model> global = MakeModel(kBlobMlp);
  Unflatten(*ins.global, *global);
  const Profile expected = ComputeProfile(*global, client.data(), 1);
  EXPECT_EQ(profiled.profile->mean, expected.mean);
  EXPECT_EQ(profiled.profile->var, expected.var);

  ins.report.profile = false;
  ins.report.loss = true;
  const FitResult valued = FitOnFreshModel(client, ins);
  EXPECT_TRUE(valued.ok);
  EXPECT_FALSE(valued.profile.has_value());
  EXPECT_TRUE(valued.params.empty());
  ModelReplicas single(*global);
  EXPECT_DOUBLE_EQ(valued.pre_train_loss, Evaluate(single, client.data()).loss);
  EXPECT_GT(valued.pre_train_loss, 0);
}

TEST(ClientTest, TrainingReturnsAChangedModelOfTheGlobalsSize) {
  Client client = BlobClient();
  FitInstructions ins = Instructions();
  ins.report.loss = true;
  ins.report.sketch_dim = 16;
  const FitResult r = FitOnFreshModel(client, ins);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.params.size(), ins.global->size());
  EXPECT_GT(ParamDistance(r.params, *ins.global), 0);
  for (float v : r.params) ASSERT_TRUE(std::isfinite(v));
  EXPECT_TRUE(std::isfinite(r.train_loss));
  EXPECT_GT(r.train_loss, 0);
  EXPECT_GT(r.pre_train_loss, 0) << "reported before training";
  EXPECT_EQ(r.sketch, UpdateSketch(r.params, *ins.global, 16)) << "the sketch of w - θ";
  EXPECT_GE(r.cost.time_s, 0);
}

TEST(ClientTest, SameInstructionsGiveTheSameBits) {
  Client a = BlobClient(), b = BlobClient();
  const FitInstructions ins = Instructions();
  const FitResult first = FitOnFreshModel(a, ins);
  EXPECT_EQ(first.params, FitOnFreshModel(b, ins).params) << "another client object";
  EXPECT_EQ(first.params, FitOnFreshModel(a, ins).params) << "the same one again";
  EXPECT_EQ(first.train_loss, FitOnFreshModel(a, ins).train_loss);

  // The batch order comes from (seed, round, client): each one matters.
  FitInstructions other_seed = ins;
  other_seed.seed += 1;
  EXPECT_NE(first.params, FitOnFreshModel(a, other_seed).params);
  FitInstructions other_round = ins;
  other_round.round += 1;
  EXPECT_NE(first.params, FitOnFreshModel(a, other_round).params);
  Client other_client = BlobClient(/*id=*/4);
  EXPECT_NE(first.params, FitOnFreshModel(other_client, ins).params);
}

// FedProx: the proximal term holds the local model nearer the global one.
TEST(ClientTest, ProximalTermPullsTowardsTheGlobalModel) {
  Client client = BlobClient();
  FitInstructions ins = Instructions();
  ins.train.epochs = 4;
  const FitResult plain = FitOnFreshModel(client, ins);
  ins.objective.prox_mu = 0;
  EXPECT_EQ(FitOnFreshModel(client, ins).params, plain.params) << "mu = 0 is FedAvg";
  ins.objective.prox_mu = 1.0;
  const FitResult prox = FitOnFreshModel(client, ins);
  EXPECT_NE(prox.params, plain.params);
  ins.objective.prox_mu = 50.0;
  const FitResult strong = FitOnFreshModel(client, ins);
  const double d_plain = ParamDistance(plain.params, *ins.global);
  const double d_prox = ParamDistance(prox.params, *ins.global);
  const double d_strong = ParamDistance(strong.params, *ins.global);
  EXPECT_LT(d_prox, d_plain);
  EXPECT_LT(d_strong, d_prox);
}

// FedBN: the client keeps its batch-norm values and starts from them.
TEST(ClientTest, FedBnKeepsTheClientsBatchNorm) {
  const ModelSpec cnn{"cnn", {1, 4, 4}, 2, {}, ""};
  torch::manual_seed(21);
  Dataset d;
  d.y = torch::randint(0, 2, {12}, torch::kLong);
  d.x = torch::rand({12, 1, 4, 4}) + d.y.view({12, 1, 1, 1}).to(torch::kFloat);
  d.num_classes = 2;
  Client client(0, std::move(d));
  FitInstructions ins = Instructions(cnn);
  ins.train.epochs = 1;
  ins.objective.keep_local_batch_norm = true;
  EXPECT_TRUE(client.local_state().empty());
  const FitResult first = FitOnFreshModel(client, ins, cnn);
  ASSERT_TRUE(first.ok) << first.error;

  // The kept values are the batch-norm entries of the returned model.
  const std::shared_ptr<Model> model = MakeModel(cnn);
  FlatParams kept_in_result;
  for (const auto& e : LayoutOf(*model).entries) {
    if (!e.is_batch_norm) continue;
    kept_in_result.insert(kept_in_result.end(), first.params.begin() + e.offset,
                          first.params.begin() + e.offset + e.size);
  }
  ASSERT_FALSE(kept_in_result.empty());
  EXPECT_EQ(client.local_state(), kept_in_result);

  // Next round from the same θ: training starts from θ with those values,
  // so the result differs from a client without kept state.
  Client fresh(client.id(), client.data());
  const FitResult second = FitOnFreshModel(client, ins, cnn);
  const FitResult from_global = FitOnFreshModel(fresh, ins, cnn);
  EXPECT_EQ(from_global.params, first.params);
  EXPECT_NE(second.params, first.params);
}

}  // namespace
}  // namespace fedprof
