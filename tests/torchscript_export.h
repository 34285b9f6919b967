#ifndef FEDPROF_TESTS_TORCHSCRIPT_EXPORT_H_
#define FEDPROF_TESTS_TORCHSCRIPT_EXPORT_H_

// TorchScript modules written in PyTorch for the tests: Debian's
// python3-torch (scripts/install-deps.sh) scripts and saves them, as a user
// would export a model for model.file.

#include <cstdlib>
#include <fstream>
#include <string>

namespace fedprof::testing_support {

// Definitions the scripts below share. lenet5() mirrors the built-in
// LeNet-5 (models.cc) child by child, with the same parameter names; Net2
// has batch norm and its layers inside nn.Sequential containers; Residual's
// forward is not the sequence of its children.
constexpr const char* kPyTorchModels = R"(
import collections, json, sys
import torch
from torch import nn

def lenet5(classes=10):
    return nn.Sequential(collections.OrderedDict([
        ('conv1', nn.Conv2d(1, 6, 5, padding=2)), ('relu1', nn.ReLU()), ('pool1', nn.MaxPool2d(2)),
        ('conv2', nn.Conv2d(6, 16, 5)), ('relu2', nn.ReLU()), ('pool2', nn.MaxPool2d(2)),
        ('flatten', nn.Flatten()),
        ('fc1', nn.Linear(16 * 5 * 5, 120)), ('relu3', nn.ReLU()),
        ('fc2', nn.Linear(120, 84)), ('relu4', nn.ReLU()),
        ('fc3', nn.Linear(84, classes))]))

class Net2(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(nn.Linear(8 * 14 * 14, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                        nn.Linear(32, 10))
    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))

class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 784)
        self.fc2 = nn.Linear(784, 10)
    def forward(self, x):
        h = self.flatten(x)
        return self.fc2(torch.relu(self.fc1(h)) + h)

# What cannot be profiled: a layer called twice (flatten), one whose output
# has rank 3 (unflatten), one called only in an if (gate), one never called
# (spare).
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.unflatten = nn.Unflatten(1, (28, 28))
        self.fc1 = nn.Linear(784, 32)
        self.gate = nn.Linear(32, 32)
        self.spare = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 10)
    def forward(self, x):
        h = torch.relu(self.fc1(self.flatten(self.unflatten(self.flatten(x)))))
        if bool(h.sum() > 0):
            h = self.gate(h)
        return self.fc2(h)

out = sys.argv[1]
)";

// Runs kPyTorchModels followed by `body` with python3, the output directory
// `dir` as sys.argv[1] (`out` in the script). Returns python3's exit status.
inline int RunPyTorch(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string script = dir + "/" + name + ".py";
  {
    std::ofstream file(script);
    file << kPyTorchModels << body;
  }
  const std::string command = "/usr/bin/python3 " + script + " " + dir;
  return std::system(command.c_str());
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_TORCHSCRIPT_EXPORT_H_
