#include "fedprof/data/memory_data.h"

#include <torch/torch.h>

#include <map>
#include <mutex>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"

namespace fedprof {
namespace {

struct Entry {
  std::shared_ptr<const MemoryData> data;
  int registrations = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Entry> entries;
};

Registry& Data() {
  static auto* registry = new Registry;  // used until exit
  return *registry;
}

void CheckSet(const Dataset& d, const std::string& where) {
  if (!d.x.defined() || !d.y.defined()) throw Error(where + ": no inputs or no targets");
  if (d.x.scalar_type() != torch::kFloat32) throw Error(where + " inputs: expected float32");
  if (d.x.dim() != 2 && d.x.dim() != 4) {
    throw Error(where + " inputs: expected [n, features] or [n, channels, height, width], got " +
                std::to_string(d.x.dim()) + " dimensions");
  }
  const int64_t n = d.x.size(0);
  if (n == 0) throw Error(where + ": no samples");
  if (d.y.size(0) != n) {
    throw Error(where + ": " + std::to_string(n) + " inputs but " + std::to_string(d.y.size(0)) + " targets");
  }
  const torch::Tensor bad_x = torch::logical_not(torch::isfinite(d.x)).flatten().nonzero();
  if (bad_x.numel() > 0) {
    const int64_t at = bad_x[0].item<int64_t>() / (d.x.numel() / n);
    throw Error(where + " inputs: sample " + std::to_string(at) + " holds a value that is not finite");
  }
  if (d.num_classes > 0) {
    if (d.y.scalar_type() != torch::kInt64 || d.y.dim() != 1) {
      throw Error(where + " targets: class labels are int64 [n]");
    }
    const torch::Tensor bad = torch::logical_or(d.y < 0, d.y >= d.num_classes).nonzero();
    if (bad.numel() > 0) {
      const int64_t at = bad[0][0].item<int64_t>();
      throw Error(where + " targets: sample " + std::to_string(at) + " has label " +
                  std::to_string(d.y[at].item<int64_t>()) + ", outside [0, " + std::to_string(d.num_classes) +
                  ")");
    }
  } else {
    if (d.y.scalar_type() != torch::kFloat32 || d.y.dim() != 2) {
      throw Error(where + " targets: regression targets are float32 [n, targets]");
    }
    if (!torch::isfinite(d.y).all().item<bool>()) throw Error(where + " targets: a value is not finite");
  }
}

void HashTensor(Sha256Stream& hash, const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  const std::vector<int64_t> shape(c.sizes().begin(), c.sizes().end());
  const int64_t dims = static_cast<int64_t>(shape.size());
  const int8_t type = static_cast<int8_t>(c.scalar_type());
  hash.Update(&type, sizeof(type));
  hash.Update(&dims, sizeof(dims));
  hash.Update(shape.data(), shape.size() * sizeof(int64_t));
  hash.Update(c.data_ptr(), c.numel() * c.element_size());
}

std::string Key(const MemoryData& data) {
  Sha256Stream hash;
  const std::string tag = "fedprof memory data 1";
  hash.Update(tag.data(), tag.size());
  for (const Dataset* d : {&data.train, &data.test}) {
    HashTensor(hash, d->x);
    HashTensor(hash, d->y);
    hash.Update(&d->num_classes, sizeof(d->num_classes));
  }
  const int64_t clients = static_cast<int64_t>(data.partition.size());
  hash.Update(&clients, sizeof(clients));
  for (const std::vector<int64_t>& rows : data.partition) {
    const int64_t size = static_cast<int64_t>(rows.size());
    hash.Update(&size, sizeof(size));
    hash.Update(rows.data(), rows.size() * sizeof(int64_t));
  }
  return "sha256:" + ToHex(hash.Finish());
}

}  // namespace

std::string RegisterMemoryData(MemoryData data, const std::string& origin) {
  CheckSet(data.train, origin + ": training set");
  CheckSet(data.test, origin + ": test set");
  if (data.train.x.sizes().slice(1) != data.test.x.sizes().slice(1)) {
    throw Error(origin + ": test inputs are not shaped as the training inputs");
  }
  if (data.train.num_classes != data.test.num_classes ||
      (data.train.num_classes == 0 && data.train.y.size(1) != data.test.y.size(1))) {
    throw Error(origin + ": the test set's targets are not of the training set's kind");
  }
  const int64_t n = data.train.size();
  for (size_t k = 0; k < data.partition.size(); ++k) {
    const std::vector<int64_t>& rows = data.partition[k];
    if (rows.empty()) throw Error(origin + ": partition: client " + std::to_string(k) + " has no samples");
    for (int64_t r : rows) {
      if (r < 0 || r >= n) {
        throw Error(origin + ": partition: client " + std::to_string(k) + " has row " + std::to_string(r) +
                    ", outside the training set's [0, " + std::to_string(n) + ")");
      }
    }
  }
  const std::string key = Key(data);
  Registry& registry = Data();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  Entry& entry = registry.entries[key];
  if (!entry.data) entry.data = std::make_shared<const MemoryData>(std::move(data));
  ++entry.registrations;
  return key;
}

void UnregisterMemoryData(const std::string& key) {
  Registry& registry = Data();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto it = registry.entries.find(key);
  if (it != registry.entries.end() && --it->second.registrations == 0) registry.entries.erase(it);
}

std::shared_ptr<const MemoryData> FindMemoryData(const std::string& key) {
  Registry& registry = Data();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto it = registry.entries.find(key);
  if (it == registry.entries.end()) {
    throw Error("data.memory_key: no data set '" + key.substr(0, 80) +
                "' is held in memory (from Python, pass the same fedprof.Dataset again)");
  }
  return it->second.data;
}

}  // namespace fedprof
