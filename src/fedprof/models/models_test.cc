#include "fedprof/models/models.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "fedprof/core/error.h"
#include "fedprof/core/params.h"

namespace fedprof {
namespace {

TEST(ModelsTest, ShapesAndDefaultProfiledLayers) {
  torch::manual_seed(0);
  const torch::Tensor img = torch::rand({4, 1, 28, 28});
  for (const std::string name : {"lenet5", "cnn"}) {
    auto m = MakeModel({name, {1, 28, 28}, 10, {}, ""});
    torch::Tensor rep;
    const torch::Tensor out = m->Forward(img, &rep);
    EXPECT_EQ(out.sizes(), (std::vector<int64_t>{4, 10})) << name;
    EXPECT_EQ(m->profiled_layer(), "fc1") << name;
    EXPECT_EQ(rep.size(0), 4) << name;
  }
  auto lenet32 = MakeModel({"lenet5", {3, 32, 32}, 10, {}, ""});
  EXPECT_EQ(lenet32->Forward(torch::rand({2, 3, 32, 32})).size(1), 10);
  auto mlp = MakeModel({"mlp", {11}, 2, {32, 16}, ""});
  torch::Tensor rep;
  EXPECT_EQ(mlp->Forward(torch::rand({5, 11}), &rep).sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{5, 32}));
}

TEST(ModelsTest, DenseRepresentationIsPreActivation) {
  torch::manual_seed(1);
  auto m = MakeModel({"mlp", {6}, 3, {8}, ""});
  const torch::Tensor x = torch::randn({10, 6});
  torch::Tensor rep;
  m->Forward(x, &rep);
  const auto params = m->named_parameters();
  const torch::Tensor expected = torch::addmm(params["fc1.bias"], x, params["fc1.weight"].t());
  EXPECT_TRUE(torch::allclose(rep, expected));
  EXPECT_LT(rep.min().item<float>(), 0.0f);  // not passed through ReLU
}

TEST(ModelsTest, ConvRepresentationIsChannelWiseSum) {
  torch::manual_seed(2);
  auto m = MakeModel({"lenet5", {1, 28, 28}, 10, {}, "conv1"});
  const torch::Tensor x = torch::rand({3, 1, 28, 28});
  torch::Tensor rep;
  m->Forward(x, &rep);
  const auto params = m->named_parameters();
  const torch::Tensor conv = torch::conv2d(x, params["conv1.weight"], params["conv1.bias"], 1, 2);
  EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{3, 6}));
  EXPECT_TRUE(torch::allclose(rep, conv.sum({2, 3}), 1e-4, 1e-4));
}

TEST(ModelsTest, BadSpecsAreRefused) {
  EXPECT_THROW(MakeModel({"lenet5", {1, 28, 28}, 10, {}, "fc9"}), Error);
  EXPECT_THROW(MakeModel({"lenet5", {11}, 10, {}, ""}), Error);
  EXPECT_THROW(MakeModel({"vgg", {1, 28, 28}, 10, {}, ""}), Error);
}

TEST(ParamsTest, FlattenRoundTripsAndCoversBatchNormBuffers) {
  torch::manual_seed(3);
  auto a = MakeModel({"cnn", {1, 28, 28}, 10, {}, ""});
  auto b = MakeModel({"cnn", {1, 28, 28}, 10, {}, ""});
  const ParamLayout layout = LayoutOf(*a);
  int bn_buffers = 0;
  for (const auto& e : layout.entries) bn_buffers += e.is_buffer && e.is_batch_norm;
  EXPECT_EQ(bn_buffers, 4);  // running mean and var of bn1, bn2
  EXPECT_EQ(layout.total, CountParameters(*a) + 2 * (32 + 64));
  FlatParams fa = Flatten(*a);
  fa[0] = 42.0f;
  fa.back() = 7.0f;  // bn2.running_var
  Unflatten(fa, *b);
  EXPECT_EQ(Flatten(*b), fa);
  fa.pop_back();
  EXPECT_THROW(Unflatten(fa, *b), Error);
}

}  // namespace
}  // namespace fedprof
