// TorchScript modules exported from PyTorch as the model of a run
// (model.file): what a module must look like, checked against PyTorch itself.
#include "fedprof/models/scripted_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/client/client.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/params.h"
#include "fedprof/profiling/profiler.h"
#include "tests/scripted_models.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::ErrorOf;
using testing_support::RawImages;
using testing_support::RunPyTorch;
using testing_support::ScriptedSpec;

// Exports lenet5(), Net2 (with non-trivial batch-norm statistics),
// Residual and Branchy once, with 200 inputs as raw float32 and, for each profiled
// layer, the profile PyTorch computes with a forward hook on that layer.
class ScriptedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One directory per process: CTest runs these tests as concurrent processes.
    dir_ = new std::string(::testing::TempDir() + "/scripted_model_test_" +
                           std::to_string(::getpid()));
    MakeDirs(*dir_);
    const int status = RunPyTorch(*dir_, "export", R"(
torch.manual_seed(0)
lenet, net2, residual, branchy = lenet5(), Net2(), Residual(), Branchy()
net2.train()
with torch.no_grad():
    for _ in range(3):
        net2(torch.rand(16, 1, 28, 28) * 2)   # running statistics away from 0 and 1
for name, net in [('lenet', lenet), ('net2', net2), ('residual', residual), ('branchy', branchy)]:
    torch.jit.script(net).save(out + '/' + name + '.pt')
x = torch.rand(200, 1, 28, 28)
x.numpy().tofile(out + '/x.f32')

def profile(net, layer):
    reps = []
    if layer.endswith(':input'):
        hook = dict(net.named_modules())[layer[:-6]].register_forward_pre_hook(
            lambda m, i: reps.append(i[0]))
    else:
        hook = dict(net.named_modules())[layer].register_forward_hook(lambda m, i, o: reps.append(o))
    net.eval()
    with torch.no_grad():
        net(x)
    hook.remove()
    r = reps[0]
    if r.dim() == 4:
        r = r.sum((2, 3))   # in the model's float32, as the built-in models fuse channels
    r = r.double()
    mean = r.mean(0)
    var = (r.pow(2).mean(0) - mean.pow(2)).clamp_min(1e-8)
    return {'mean': mean.tolist(), 'var': var.tolist()}

profiles = {'lenet/fc1': profile(lenet, 'fc1'), 'lenet/conv2': profile(lenet, 'conv2'),
            'net2/classifier.0': profile(net2, 'classifier.0'),
            'net2/features.1': profile(net2, 'features.1'),
            'residual/fc1': profile(residual, 'fc1'), 'residual/fc2:input': profile(residual, 'fc2:input')}
json.dump(profiles, open(out + '/profiles.json', 'w'))
)");
    ASSERT_EQ(status, 0) << "needs python3-torch (scripts/install-deps.sh)";
  }

  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static ModelSpec Spec(const std::string& file, const std::string& layer = "") {
    return ScriptedSpec(Path(file), layer);
  }

  static Dataset Inputs() { return RawImages(Path("x.f32"), 200); }

  static std::string* dir_;
};

std::string* ScriptedModelTest::dir_ = nullptr;

// (b) The profile computed here equals PyTorch's, for a dense layer (its
// pre-activation), a conv layer (channel sums), layers inside nn.Sequential
// containers, batch norm in eval mode included, and the layers of a forward
// with a residual connection (a layer's output, and a layer's input).
TEST_F(ScriptedModelTest, ProfileEqualsPyTorchs) {
  const nlohmann::json expected = nlohmann::json::parse(ReadFile(Path("profiles.json")));
  const Dataset data = Inputs();
  for (const auto& [key, want] : expected.items()) {
    const std::string file = key.substr(0, key.find('/')) + ".pt";
    const std::string layer = key.substr(key.find('/') + 1);
    auto model = MakeModel(Spec(file, layer));
    const Profile p = ComputeProfile(*model, data, 3, /*batch_size=*/64);
    EXPECT_EQ(p.layer, layer);
    EXPECT_EQ(p.version, 3);
    ASSERT_EQ(p.mean.size(), want.at("mean").size()) << key;
    for (size_t i = 0; i < p.mean.size(); ++i) {
      EXPECT_NEAR(p.mean[i], want.at("mean")[i].get<double>(), 1e-5) << key << " unit " << i;
      EXPECT_NEAR(p.var[i], want.at("var")[i].get<double>(), 1e-5) << key << " unit " << i;
    }
  }
}

// The default profiled layer is the first dense layer, as fc1 is for the
// built-in models; the profileable layers are those before the output.
TEST_F(ScriptedModelTest, DefaultLayerIsTheFirstDenseLayer) {
  auto lenet = MakeModel(Spec("lenet.pt"));
  EXPECT_EQ(lenet->profiled_layer(), "fc1");
  EXPECT_EQ(lenet->ProfileableLayers(),
            (std::vector<std::string>{"conv1", "relu1", "pool1", "conv2", "relu2", "pool2",
                                      "flatten", "fc1", "relu3", "fc2", "relu4", "fc1:input",
                                      "fc2:input", "fc3:input"}));
  auto net2 = MakeModel(Spec("net2.pt"));
  EXPECT_EQ(net2->profiled_layer(), "classifier.0");
  const auto layers = net2->ProfileableLayers();
  EXPECT_EQ(layers.front(), "features");
  EXPECT_EQ(layers[layers.size() - 3], "classifier.2");  // classifier.3 is the output layer
  EXPECT_EQ(layers.back(), "classifier.3:input");
  // The residual connection is no obstacle.
  EXPECT_EQ(MakeModel(Spec("residual.pt"))->profiled_layer(), "fc1");
}

// Parameters and buffers are the script module's own tensors: what
// Unflatten writes, the module computes with; and the names and counts are
// those of the PyTorch module.
TEST_F(ScriptedModelTest, FlattenAndUnflattenReachTheScriptModule) {
  auto a = MakeModel(Spec("lenet.pt"));
  auto b = MakeModel(Spec("lenet.pt"));
  EXPECT_EQ(CountParameters(*a), 61706);  // the built-in LeNet-5's count on 28x28
  const ParamLayout layout = LayoutOf(*a);
  EXPECT_EQ(layout.entries.front().name, "conv1.weight");
  EXPECT_EQ(layout.entries.back().name, "fc3.bias");
  torch::NoGradGuard no_grad;
  a->eval();
  b->eval();
  const at::Tensor x = Inputs().x.narrow(0, 0, 8);
  const at::Tensor before = b->Forward(x);
  FlatParams flat = Flatten(*a);
  for (float& v : flat) v *= 0.5f;
  Unflatten(flat, *b);
  EXPECT_EQ(Flatten(*b), flat);
  EXPECT_FALSE(torch::equal(b->Forward(x), before));
  Unflatten(Flatten(*a), *b);
  EXPECT_TRUE(torch::equal(b->Forward(x), a->Forward(x)));
}

// (c) FedBN finds the batch-norm entries of a script module: the weights,
// biases and running statistics of its BatchNorm submodules, nothing else;
// and a FedBN client keeps them.
TEST_F(ScriptedModelTest, FedBnFindsTheBatchNormEntries) {
  auto model = MakeModel(Spec("net2.pt"));
  std::vector<std::string> batch_norm;
  for (const auto& e : LayoutOf(*model).entries) {
    if (e.is_batch_norm) batch_norm.push_back(e.name);
  }
  EXPECT_EQ(batch_norm,
            (std::vector<std::string>{"features.1.weight", "features.1.bias", "classifier.1.weight",
                                      "classifier.1.bias", "features.1.running_mean",
                                      "features.1.running_var", "classifier.1.running_mean",
                                      "classifier.1.running_var"}));
  for (const auto& e : LayoutOf(*MakeModel(Spec("lenet.pt"))).entries) {
    EXPECT_FALSE(e.is_batch_norm) << e.name;
  }
  // Training in train mode moves the running statistics; the client keeps
  // its own, and starts its next round from them.
  Dataset d = Inputs();
  d.y = torch::randint(0, 10, {200}, torch::kLong);
  Client client(0, d);
  FitInstructions ins;
  ins.global = std::make_shared<const FlatParams>(Flatten(*model));
  ins.objective.keep_local_batch_norm = true;
  ins.train.epochs = 1;
  const FitResult first = client.Fit(ins, *model);
  ASSERT_TRUE(first.ok);
  const ParamLayout layout = LayoutOf(*model);
  for (const auto& e : layout.entries) {
    if (e.name == "features.1.running_mean") {
      EXPECT_NE(first.params[e.offset], (*ins.global)[e.offset]) << "eval-mode training?";
    }
  }
  EXPECT_EQ(client.local_state().size(), static_cast<size_t>(2 * 8 + 2 * 8 + 2 * 32 + 2 * 32));
}

// (d) What cannot be profiled is refused in one line that names the layer
// and says why; the model runs as before.
TEST_F(ScriptedModelTest, UnprofileableLayersAreRefusedWithTheReason) {
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"flatten", "the forward of model.file " + Path("branchy.pt") + " calls 'flatten' 2 times"},
      {"unflatten", "its output has shape [2, 28, 28]"},
      {"gate", "'gate' runs inside an if or a loop of the forward"},
      {"spare", "'spare' is a layer of model.file " + Path("branchy.pt") +
                    " that its forward never calls; expected fc1|"},
      {"unflatten:input", "names the input of a Linear layer, and 'unflatten' is a Unflatten"},
      {"fc2", "its output is the model's (name its input, 'fc2:input'"},
  };
  for (const auto& [layer, why] : refusals) {
    const std::string e = ErrorOf([&, name = layer] { MakeModel(Spec("branchy.pt", name)); });
    EXPECT_NE(e.find("model.profile_layer: '" + layer + "' "), std::string::npos) << e;
    EXPECT_NE(e.find(why), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  auto branchy = MakeModel(Spec("branchy.pt"));
  EXPECT_EQ(branchy->profiled_layer(), "fc1");
  EXPECT_EQ(branchy->Forward(torch::rand({3, 1, 28, 28})).sizes(), (std::vector<int64_t>{3, 10}));

  const std::string unknown = ErrorOf([&] { MakeModel(Spec("lenet.pt", "fc9")); });
  EXPECT_NE(unknown.find("'fc9' is not a layer of model.file"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("expected conv1|relu1|"), std::string::npos) << unknown;
  const std::string output = ErrorOf([&] { MakeModel(Spec("lenet.pt", "fc3")); });
  EXPECT_NE(output.find("is not a layer"), std::string::npos) << "the output layer: " << output;

  ModelSpec wrong = Spec("lenet.pt");
  wrong.outputs = 5;
  const std::string classes = ErrorOf([&] { MakeModel(wrong); });
  EXPECT_NE(classes.find("output of shape [2, 10]"), std::string::npos) << classes;
  wrong = Spec("lenet.pt");
  wrong.input_shape = {3, 32, 32};
  const std::string input = ErrorOf([&] { MakeModel(wrong); });
  EXPECT_NE(input.find("fails on samples of shape [2, 3, 32, 32]"), std::string::npos) << input;
  EXPECT_EQ(input.find('\n'), std::string::npos) << input;

  WriteFileAtomic(Path("junk.pt"), "not a model");
  const std::string junk = ErrorOf([&] { MakeModel(Spec("junk.pt")); });
  EXPECT_NE(junk.find("junk.pt: not a TorchScript module"), std::string::npos) << junk;
  EXPECT_EQ(junk.find('\n'), std::string::npos) << junk;
  const std::string missing = ErrorOf([&] { MakeModel(Spec("none.pt")); });
  EXPECT_NE(missing.find("none.pt: no such file"), std::string::npos) << missing;
}

// The module is the one the run was set up with: a content hash pins it.
TEST_F(ScriptedModelTest, ContentHashPinsTheModule) {
  ModelSpec spec = Spec("lenet.pt");
  spec.file_sha256 = FileSha256Hex(spec.file);
  EXPECT_EQ(spec.file_sha256.size(), 64u);
  EXPECT_NO_THROW(MakeModel(spec));
  spec.file = Path("net2.pt");
  const std::string changed = ErrorOf([&] { MakeModel(spec); });
  EXPECT_NE(changed.find("net2.pt: content has SHA-256"), std::string::npos) << changed;
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace fedprof
