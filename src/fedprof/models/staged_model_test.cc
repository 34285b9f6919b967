#include "fedprof/models/staged_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/fbftl/payload.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

std::shared_ptr<StagedModel> Source() {
  torch::manual_seed(1);
  auto net = MakeStagedModel("vgg_small", {1, 8, 8}, 10);
  net->Reinitialize(0, net->num_stages());
  return net;
}

// The simulator's LeNet-5 is the staged one: the same parameters from the
// same seed, the stages chain to its forward, and its profile is fc1's
// pre-activation.
TEST(StagedModelTest, LeNet5IsOneModelForProfilingAndTransfer) {
  torch::manual_seed(3);
  auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, ""});
  torch::manual_seed(3);
  auto staged = MakeStagedModel("lenet5", {1, 28, 28}, 10);
  EXPECT_EQ(staged->stage_names(),
            (std::vector<std::string>{"conv1", "conv2", "fc1", "fc2", "fc3"}));
  EXPECT_EQ(model->ProfileableLayers(), staged->ProfileableLayers());
  torch::NoGradGuard no_grad;
  model->train(false);
  staged->train(false);
  const at::Tensor x = torch::randn({4, 1, 28, 28});
  at::Tensor rep;
  const at::Tensor out = model->Forward(x, &rep);
  EXPECT_TRUE(torch::equal(out, staged->ForwardStages(x, 0, staged->num_stages())));
  const size_t fc1 = staged->StageIndex("fc1");
  const at::Tensor features = staged->ForwardStages(x, 0, fc1).flatten(1);
  const auto params = model->named_parameters();
  EXPECT_TRUE(
      torch::allclose(rep, torch::addmm(params["fc1.bias"], features, params["fc1.weight"].t())));
}

// Evaluation (no gradients: ReLU in place, pooling without indices) gives
// the values of the same forward with gradients, and the representation of
// every profiled layer is its own, not what the in-place ReLU made of it.
TEST(StagedModelTest, EvaluationGivesTheForwardWithGradientsValues) {
  torch::manual_seed(5);
  auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, ""});
  model->eval();
  const at::Tensor x = torch::randn({6, 1, 28, 28});
  for (const std::string& layer : model->ProfileableLayers()) {
    model->SetProfiledLayer(layer);
    at::Tensor rep, rep_graded;
    const at::Tensor out_graded = model->Forward(x, &rep_graded);
    ASSERT_TRUE(out_graded.requires_grad());
    torch::NoGradGuard no_grad;
    const at::Tensor out = model->Forward(x, &rep);
    EXPECT_TRUE(torch::equal(out, out_graded.detach())) << layer;
    EXPECT_TRUE(torch::equal(rep, rep_graded.detach())) << layer;
    EXPECT_LT(rep.min().item<float>(), 0) << layer << ": a pre-activation, before the ReLU";
  }
}

TEST(StagedModelTest, SplitForwardEqualsTheWholeAndCountsMatch) {
  auto net = Source();
  EXPECT_EQ(net->stage_names(),
            (std::vector<std::string>{"conv1", "conv2", "fc1", "fc2", "fc3", "fc4", "fc5"}));
  torch::NoGradGuard no_grad;
  net->train(false);
  const at::Tensor x = torch::randn({5, 1, 8, 8});
  const size_t cut = net->StageIndex("fc2");
  EXPECT_TRUE(
      torch::allclose(net->ForwardStages(net->ForwardStages(x, 0, cut), cut, 7), net->Forward(x)));
  const auto layers = CountStageLayers(*net, {1, 8, 8});
  EXPECT_EQ(layers[3].inputs, 256);                 // N- of fc2: fc1's 256 features
  EXPECT_EQ(layers[3].params, 1024 * (256 + 1));    // T = N+(N- + 1)
  EXPECT_EQ(layers[0].params, 16 * (9 + 1));        // c+(a'b'c- + 1)
  EXPECT_EQ(layers[0].macs, 8 * 8 * 16 * (9 + 1));  // a- b- T
  EXPECT_EQ(layers[2].macs, layers[2].params);      // dense, though its input is an image
  EXPECT_THROW(net->StageIndex("fc9"), Error);
}

TEST(StagedModelTest, SavedNetworkLoadsBackIdentical) {
  auto net = Source();
  const std::string path = ::testing::TempDir() + "/stage_net.pt";
  net->Save(path);
  auto loaded = LoadStagedModel(path, {1, 8, 8}, 10);
  torch::NoGradGuard no_grad;
  net->train(false);
  loaded->train(false);
  const at::Tensor x = torch::randn({3, 1, 8, 8});
  EXPECT_TRUE(torch::equal(net->Forward(x), loaded->Forward(x)));
  EXPECT_EQ(loaded->profiled_layer(), "fc1");
  EXPECT_EQ(loaded->stage_names(), net->stage_names());
  // A truncated file is refused with its name.
  const std::string bytes = ReadFile(path);
  WriteFileAtomic(path, bytes.substr(0, bytes.size() / 2));
  try {
    LoadStagedModel(path, {1, 8, 8}, 10);
    FAIL() << "a truncated model loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A module scripted and saved by PyTorch (Debian's python3-torch) loads as a
// chain of its children and computes what PyTorch computed.
TEST(StagedModelTest, LoadsATorchScriptModuleFromPyTorch) {
  const std::string dir = ::testing::TempDir();
  const std::string script = dir + "/export.py";
  std::ofstream(script) << R"(import sys, collections, torch
torch.manual_seed(0)
net = torch.nn.Sequential(collections.OrderedDict([
    ('conv1', torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))),
    ('fc1', torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU())),
    ('fc2', torch.nn.Linear(16, 10))]))
torch.jit.script(net).save(sys.argv[1] + '/scripted.pt')
x = torch.arange(64, dtype=torch.float32).reshape(1, 1, 8, 8) / 64
with open(sys.argv[1] + '/expected.txt', 'w') as f:
    f.write(' '.join('%.8g' % v for v in net(x).flatten().tolist()))
)";
  const std::string command = "/usr/bin/python3 " + script + " " + dir;
  ASSERT_EQ(std::system(command.c_str()), 0) << "needs python3-torch (scripts/install-deps.sh)";
  auto net = LoadStagedModel(dir + "/scripted.pt", {1, 8, 8}, 10);
  EXPECT_EQ(net->stage_names(), (std::vector<std::string>{"conv1", "fc1", "fc2"}));
  torch::NoGradGuard no_grad;
  net->train(false);
  const at::Tensor out =
      net->ForwardStages(torch::arange(64, torch::kFloat32).reshape({1, 1, 8, 8}) / 64, 0, 3);
  std::ifstream expected(dir + "/expected.txt");
  for (int i = 0; i < 10; ++i) {
    double v = 0;
    expected >> v;
    EXPECT_NEAR(out[0][i].item<double>(), v, 1e-5) << "output " << i;
  }
  // Its parameters train: a cut at fc1 gives a 64-value feature vector.
  const auto layers = CountStageLayers(*net, {1, 8, 8});
  EXPECT_EQ(layers[1].inputs, 64);
  EXPECT_EQ(layers[1].params, 16 * 65);
}

}  // namespace
}  // namespace fedprof
