// The models a vision practitioner exports first, from torchvision (Debian's
// python3-torchvision): ResNet-18, MobileNet V2 and ShuffleNet V2, their
// input layer changed to one channel, scripted and saved as model.file.
// Their forward is not the sequence of their children, so what FedProf
// profiles is taken from inside that forward; here it is checked against
// PyTorch's forward hooks, and FedProf and FedBN run on each.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/params.h"
#include "fedprof/models/models.h"
#include "fedprof/profiling/profiler.h"
#include "tests/csv_columns.h"
#include "tests/run_cli.h"
#include "tests/scripted_models.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::CliResult;
using testing_support::Columns;
using testing_support::ErrorOf;
using testing_support::RawImages;
using testing_support::RunCli;
using testing_support::ScriptedSpec;

// Exports the three models (seeded), 64 inputs, the profile PyTorch's hooks
// give for a few layers of each (a pre-hook for "LAYER:input"; the hooked
// value is copied when the hook runs, as later in-place operations such as
// ResNet's `out += identity` change it), and each model's batch-norm
// entries.
constexpr const char* kExport = R"(
import torchvision
torch.manual_seed(0)
resnet = torchvision.models.resnet18(num_classes=10)
resnet.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
mobilenet = torchvision.models.mobilenet_v2(num_classes=10)
mobilenet.features[0][0] = nn.Conv2d(1, 32, 3, 2, 1, bias=False)
shufflenet = torchvision.models.shufflenet_v2_x0_5(num_classes=10)
shufflenet.conv1[0] = nn.Conv2d(1, 24, 3, 2, 1, bias=False)
models = {'resnet18': resnet, 'mobilenet_v2': mobilenet, 'shufflenet_v2': shufflenet}
x = torch.rand(64, 1, 28, 28)
x.numpy().tofile(out + '/x.f32')
layers = {'resnet18': ['layer4.1.conv2', 'layer4.1.bn2', 'layer1', 'avgpool', 'fc:input'],
          'mobilenet_v2': ['features.18', 'features.3.conv.1', 'classifier.1:input'],
          'shufflenet_v2': ['stage3', 'conv5', 'fc:input']}
profiles, batch_norm = {}, {}
for name, net in models.items():
    # Running statistics away from their initial 0 and 1.
    net.train()
    with torch.no_grad():
        net(torch.rand(32, 1, 28, 28) * 2)
    torch.jit.script(net).save(out + '/' + name + '.pt')
    net.eval()
    modules = dict(net.named_modules())
    for layer in layers[name]:
        reps = []
        if layer.endswith(':input'):
            hook = modules[layer[:-6]].register_forward_pre_hook(lambda m, i: reps.append(i[0].clone()))
        else:
            hook = modules[layer].register_forward_hook(lambda m, i, o: reps.append(o.clone()))
        with torch.no_grad():
            net(x)
        hook.remove()
        r = reps[0]
        if r.dim() == 4:
            r = r.sum((2, 3))
        r = r.double()
        mean = r.mean(0)
        var = (r.pow(2).mean(0) - mean.pow(2)).clamp_min(1e-8)
        profiles[name + '/' + layer] = {'mean': mean.tolist(), 'var': var.tolist()}
    batch_norm[name] = sorted(
        m + '.' + t for m, mod in net.named_modules() if isinstance(mod, nn.modules.batchnorm._BatchNorm)
        for t in ['weight', 'bias', 'running_mean', 'running_var'])
json.dump({'profiles': profiles, 'batch_norm': batch_norm}, open(out + '/expected.json', 'w'))
)";

class TorchvisionModelsTest : public ::testing::Test {
 protected:
  // One export for every test process of this build tree (CTest runs the
  // tests in several processes, and an export takes seconds): the first to
  // finish renames its directory into place, the others use it.
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/torchvision_models");
    if (FileExists(*dir_ + "/expected.json")) return;
    const std::string mine = *dir_ + ".export." + std::to_string(::getpid());
    std::filesystem::remove_all(mine);
    MakeDirs(mine);
    const int status = testing_support::RunPyTorch(mine, "export", kExport);
    ASSERT_EQ(status, 0) << "needs python3-torchvision (scripts/install-deps.sh)";
    std::error_code ignored;
    std::filesystem::rename(mine, *dir_, ignored);  // fails if another process won
    std::filesystem::remove_all(mine, ignored);
    ASSERT_TRUE(FileExists(*dir_ + "/expected.json"));
  }

  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static nlohmann::json Expected() { return nlohmann::json::parse(ReadFile(Path("expected.json"))); }

  static ModelSpec Spec(const std::string& model, const std::string& layer = "") {
    return ScriptedSpec(Path(model + ".pt"), layer);
  }

  static Dataset Inputs() { return RawImages(Path("x.f32"), 64); }

  static std::string* dir_;
};

std::string* TorchvisionModelsTest::dir_ = nullptr;

// The profile of a named layer, taken from inside the module's forward,
// equals the one PyTorch's forward hook gives on the same batch: layers deep
// in residual blocks, a batch norm whose output the block then changes in
// place, whole stages, pooling, and the input of the classifier.
TEST_F(TorchvisionModelsTest, ProfilesEqualPyTorchsForwardHooks) {
  const nlohmann::json expected = Expected().at("profiles");
  const Dataset data = Inputs();
  ASSERT_EQ(expected.size(), 11u);
  for (const auto& [key, want] : expected.items()) {
    const std::string model = key.substr(0, key.find('/'));
    const std::string layer = key.substr(key.find('/') + 1);
    auto m = MakeModel(Spec(model, layer));
    const Profile p = ComputeProfile(*m, data, 1, /*batch_size=*/32);
    EXPECT_EQ(p.layer, layer);
    ASSERT_EQ(p.mean.size(), want.at("mean").size()) << key;
    for (size_t i = 0; i < p.mean.size(); ++i) {
      const double mean = want.at("mean")[i].get<double>(), var = want.at("var")[i].get<double>();
      EXPECT_NEAR(p.mean[i], mean, 1e-4 * std::max(1.0, std::abs(mean))) << key << " unit " << i;
      EXPECT_NEAR(p.var[i], var, 1e-4 * std::max(1.0, var)) << key << " unit " << i;
    }
  }
}

// A network whose only dense layer is its classifier is profiled by default
// at that layer's input, the penultimate representation; its output (the
// logits) cannot be profiled, a layer called twice cannot either, and an
// unknown name lists the layers that can. The model's output is unchanged.
TEST_F(TorchvisionModelsTest, DefaultLayerIsTheClassifiersInput) {
  EXPECT_EQ(MakeModel(Spec("resnet18"))->profiled_layer(), "fc:input");
  EXPECT_EQ(MakeModel(Spec("mobilenet_v2"))->profiled_layer(), "classifier.1:input");
  EXPECT_EQ(MakeModel(Spec("shufflenet_v2"))->profiled_layer(), "fc:input");

  auto resnet = MakeModel(Spec("resnet18"));
  const auto layers = resnet->ProfileableLayers();
  for (const char* name : {"conv1", "layer1", "layer4.1.conv2", "avgpool", "fc:input"}) {
    EXPECT_NE(std::find(layers.begin(), layers.end(), name), layers.end()) << name;
  }
  for (const char* name : {"fc", "layer4.1.relu"}) {
    EXPECT_EQ(std::find(layers.begin(), layers.end(), name), layers.end()) << name;
  }
  const std::string twice = ErrorOf([&] { MakeModel(Spec("resnet18", "layer4.1.relu")); });
  EXPECT_NE(twice.find("calls 'layer4.1.relu' 2 times"), std::string::npos) << twice;
  const std::string output = ErrorOf([&] { MakeModel(Spec("resnet18", "fc")); });
  EXPECT_NE(output.find("its output is the model's"), std::string::npos) << output;
  const std::string unknown = ErrorOf([&] { MakeModel(Spec("resnet18", "layer9")); });
  EXPECT_NE(unknown.find("'layer9' is not a layer of model.file"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("expected conv1|bn1|"), std::string::npos) << unknown;
  for (const std::string& e : {twice, output, unknown}) EXPECT_EQ(e.find('\n'), std::string::npos);

  torch::NoGradGuard no_grad;
  resnet->eval();
  const at::Tensor x = Inputs().x.narrow(0, 0, 8);
  at::Tensor rep;
  const at::Tensor with_rep = resnet->Forward(x, &rep);
  EXPECT_TRUE(torch::equal(with_rep, resnet->Forward(x)));
  EXPECT_EQ(rep.sizes(), (std::vector<int64_t>{8, 512}));
}

// FedBN's entries are exactly the batch norms PyTorch lists.
TEST_F(TorchvisionModelsTest, FedBnFindsTheirBatchNorms) {
  const nlohmann::json expected = Expected().at("batch_norm");
  for (const auto& [model, names] : expected.items()) {
    std::set<std::string> found;
    for (const auto& e : LayoutOf(*MakeModel(Spec(model))).entries) {
      if (e.is_batch_norm) found.insert(e.name);
    }
    const auto want = names.get<std::set<std::string>>();
    EXPECT_GT(want.size(), 40u) << model;
    EXPECT_EQ(found, want) << model;
  }
}

// FedProf, profiling each model at its default layer, trains each for two
// rounds on Fashion-MNIST (FedProf with FedBN keeps ShuffleNet's batch norms
// local). In two rounds of 90 samples of 28x28, ResNet-18 learns (about
// 0.3 on 100 test images); MobileNet V2 and ShuffleNet V2 stay near chance
// at this budget, so of them the test asks that they profile and train to a
// finite loss.
TEST_F(TorchvisionModelsTest, FedProfTrainsEachModel) {
  if (!FileExists("/usr/share/datasets/fashion-mnist")) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string run =
      "simulate --set data.train_limit=400 --set data.test_limit=100 --set data.holdout_share=0.1 "
      "--set clients.count=4 --set strategy.fraction=0.5 --set rounds=2 --set train.epochs=1 "
      "--set partition.kind=iid --set train.lr=0.05 --set threads=1 --set report.progress=false "
      "--set strategy.name=fedprof";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"resnet18", ""}, {"mobilenet_v2", ""}, {"shufflenet_v2", ""},
      {"shufflenet_v2", " --set strategy.aggregator=fedbn"}};
  for (const auto& [model, extra] : runs) {
    const std::string out = Path("run_" + model + (extra.empty() ? "" : "_fedbn"));
    std::filesystem::remove_all(out);
    const CliResult r =
        RunCli(run + extra + " --set model.file=" + Path(model + ".pt") + " --out " + out);
    ASSERT_EQ(r.code, 0) << model << extra << ": " << r.output;
    const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
    EXPECT_GT(summary.at("profiling_time_per_round_s").get<double>(), 0) << model;
    const double accuracy = summary.at("best_accuracy").get<double>();
    const auto losses = Columns(out + "/metrics.csv").at("train_loss");
    ASSERT_EQ(losses.size(), 2u) << model << extra;
    for (const std::string& loss : losses) EXPECT_TRUE(std::isfinite(std::stod(loss))) << model;
    if (model == "resnet18") {
      EXPECT_GT(accuracy, 0.15) << model << extra;
    }
    std::printf("%s%s: best accuracy %.3f after 2 rounds\n", model.c_str(), extra.c_str(), accuracy);
  }
}

}  // namespace
}  // namespace fedprof
