#include "fedprof/models/models.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

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

ModelSpec ImageSpec(const std::string& name, std::vector<int64_t> shape, double width = 1.0,
                    const std::string& layer = "") {
  ModelSpec spec{name, std::move(shape), 10, {}, layer};
  spec.width = width;
  return spec;
}

TEST(ModelsTest, ShuffleNetAndResNetTakeCifarAndMnistShapes) {
  torch::manual_seed(4);
  const torch::Tensor cifar = torch::rand({2, 3, 32, 32});
  const torch::Tensor mnist = torch::rand({2, 1, 28, 28});
  for (const auto& [name, width] : std::vector<std::pair<std::string, double>>{
           {"shufflenet_v2", 0.5}, {"shufflenet_v2", 1.0}, {"resnet18", 1.0}}) {
    auto m3 = MakeModel(ImageSpec(name, {3, 32, 32}, width));
    EXPECT_EQ(m3->Forward(cifar).sizes(), (std::vector<int64_t>{2, 10})) << name << width;
    auto m1 = MakeModel(ImageSpec(name, {1, 28, 28}, width));
    EXPECT_EQ(m1->Forward(mnist).sizes(), (std::vector<int64_t>{2, 10})) << name << width;
  }
}

TEST(ModelsTest, ShuffleNetAndResNetProfileEveryBlock) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::rand({2, 3, 16, 16});
  struct Case {
    std::string name;
    double width;
    std::string default_layer;
    std::vector<std::string> layers;
    std::vector<int64_t> channels;
  };
  const std::vector<Case> cases = {
      {"shufflenet_v2", 0.5, "stem", {"stem", "stage2", "stage3", "stage4", "conv5"},
       {24, 48, 96, 192, 1024}},
      {"shufflenet_v2", 1.0, "stem", {"stem", "stage2", "stage3", "stage4", "conv5"},
       {24, 116, 232, 464, 1024}},
      {"resnet18", 1.0, "layer4", {"stem", "layer1", "layer2", "layer3", "layer4"},
       {64, 64, 128, 256, 512}},
  };
  for (const Case& c : cases) {
    auto m = MakeModel(ImageSpec(c.name, {3, 16, 16}, c.width));
    EXPECT_EQ(m->profiled_layer(), c.default_layer) << c.name;
    EXPECT_EQ(m->ProfileableLayers(), c.layers) << c.name;
    for (size_t i = 0; i < c.layers.size(); ++i) {
      m->SetProfiledLayer(c.layers[i]);
      torch::Tensor rep;
      m->Forward(x, &rep);
      EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{2, c.channels[i]})) << c.name << c.layers[i];
    }
  }
  // The FedProf paper's ShuffleNet v2 profile: 24 means and 24 variances as
  // floats, 192 bytes.
  auto shufflenet = MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}));
  torch::Tensor rep;
  shufflenet->Forward(torch::rand({2, 3, 32, 32}), &rep);
  EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{2, 24}));
  EXPECT_EQ(2 * rep.size(1) * static_cast<int64_t>(sizeof(float)), 192);
  auto resnet = MakeModel(ImageSpec("resnet18", {3, 32, 32}));
  resnet->Forward(torch::rand({2, 3, 32, 32}), &rep);
  EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{2, 512}));
}

TEST(ModelsTest, StemRepresentationIsChannelSumOfConvBnRelu) {
  torch::manual_seed(6);
  const torch::Tensor x = torch::randn({2, 3, 12, 12});
  for (const std::string name : {"resnet18", "shufflenet_v2"}) {
    auto m = MakeModel(ImageSpec(name, {3, 12, 12}, 1.0, "stem"));
    // Non-trivial running statistics, so eval mode really uses them.
    for (auto& b : m->named_buffers()) {
      if (b.key().find("running_mean") != std::string::npos) b.value().uniform_(-0.5, 0.5);
      if (b.key().find("running_var") != std::string::npos) b.value().uniform_(0.5, 2.0);
    }
    m->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor rep;
    m->Forward(x, &rep);
    const auto modules = m->named_modules();
    const torch::Tensor h = torch::relu(modules["stem.bn"]->as<torch::nn::BatchNorm2d>()->forward(
        modules["stem.conv"]->as<torch::nn::Conv2d>()->forward(x)));
    EXPECT_EQ(h.sizes(), (std::vector<int64_t>{2, name == "resnet18" ? 64 : 24, 12, 12}));
    EXPECT_TRUE(torch::allclose(rep, h.sum({2, 3}), 1e-4, 1e-4)) << name;
  }
}

TEST(ModelsTest, ShuffleNetAndResNetParameterCounts) {
  // The CIFAR ResNet-18 of the literature with a 10-way output layer.
  EXPECT_EQ(CountParameters(*MakeModel(ImageSpec("resnet18", {3, 32, 32}))), 11173962);
  // torchvision's ShuffleNet V2 1.0x has 2,278,604 parameters with 1000
  // classes; its stride-2 stem has the same weights as the stride-1 one here,
  // so only the output layer differs: 1024 * 10 + 10 instead of 1024 * 1000 +
  // 1000.
  EXPECT_EQ(CountParameters(*MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}))),
            2278604 - (1024 * 1000 + 1000) + (1024 * 10 + 10));
  // The same reasoning for the other widths (torchvision: 1,366,792;
  // 3,503,624; 7,393,996, whose conv5 has 2048 channels).
  EXPECT_EQ(CountParameters(*MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}, 0.5))),
            1366792 - (1024 * 1000 + 1000) + (1024 * 10 + 10));
  EXPECT_EQ(CountParameters(*MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}, 1.5))),
            3503624 - (1024 * 1000 + 1000) + (1024 * 10 + 10));
  EXPECT_EQ(CountParameters(*MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}, 2.0))),
            7393996 - (2048 * 1000 + 1000) + (2048 * 10 + 10));
}

TEST(ModelsTest, BadShuffleNetWidthAndUnknownNamesAreRefused) {
  try {
    MakeModel(ImageSpec("shufflenet_v2", {3, 32, 32}, 0.75));
    ADD_FAILURE() << "width 0.75 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.width"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0.75"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeModel(ImageSpec("resnet18", {784})), Error);
  EXPECT_THROW(MakeModel(ImageSpec("resnet18", {3, 32, 32}, 1.0, "fc")), Error);
  try {
    MakeModel(ImageSpec("vgg", {3, 32, 32}));
    ADD_FAILURE() << "unknown model accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lenet5|cnn|mlp|shufflenet_v2|resnet18"),
              std::string::npos)
        << e.what();
  }
}

TEST(ParamsTest, ResNetLayoutCoversEveryBatchNormBuffer) {
  auto m = MakeModel(ImageSpec("resnet18", {3, 32, 32}));
  const ParamLayout layout = LayoutOf(*m);
  int bn_buffers = 0;
  for (const auto& e : layout.entries) bn_buffers += e.is_buffer && e.is_batch_norm;
  // Stem, two per basic block (8 blocks) and three projection shortcuts.
  EXPECT_EQ(bn_buffers, 2 * (1 + 16 + 3));
  int64_t bn_channels = 64;
  for (int64_t c : {64, 128, 256, 512}) bn_channels += 4 * c;
  bn_channels += 128 + 256 + 512;
  EXPECT_EQ(layout.total, CountParameters(*m) + 2 * bn_channels);
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

// The built-in models' pooling without gradients: max_pool2d's values bit
// for bit, odd sizes and NaN included.
TEST(ModelsTest, FastPoolingGivesMaxPool2dsValues) {
  torch::manual_seed(8);
  namespace F = torch::nn::functional;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{3, 6, 28, 28}, {2, 4, 7, 9}, {1, 1, 2, 2}}) {
    torch::Tensor x = torch::relu(torch::randn(shape));
    x.view(-1)[1] = std::nan("");
    const torch::Tensor expected = F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
    torch::NoGradGuard no_grad;
    const torch::Tensor fast = MaxPool2(x);
    ASSERT_EQ(fast.sizes(), expected.sizes());
    EXPECT_TRUE(fast.is_contiguous());
    EXPECT_TRUE(torch::equal(fast.nan_to_num(-1), expected.nan_to_num(-1)));
    EXPECT_EQ(fast.isnan().sum().item<int64_t>(), expected.isnan().sum().item<int64_t>());
  }
}

}  // namespace
}  // namespace fedprof
