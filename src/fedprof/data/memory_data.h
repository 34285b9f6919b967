#ifndef FEDPROF_DATA_MEMORY_DATA_H_
#define FEDPROF_DATA_MEMORY_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/data/dataset.h"

namespace fedprof {

// Data sets handed over in memory rather than read from files: the Python
// module's fedprof.Dataset (NumPy arrays, a torch Dataset), or a C++
// program's own. A run takes one with data.name = memory and
// data.memory_key = the key its registration returned, and may take the
// clients' samples as given with partition.kind = given.
struct MemoryData {
  Dataset train;
  Dataset test;
  // Client k's rows of `train` (partition.kind = given); empty: none given.
  std::vector<std::vector<int64_t>> partition;
};

// Checks `data` (shapes and types as Dataset describes them, finite
// values, labels in [0, num_classes), test inputs shaped as the training
// inputs, partition rows in range and no client without samples) and
// registers it; throws fedprof::Error naming `origin` and what is wrong.
// Returns its key, "sha256:" and the digest of its contents (values,
// shapes, classes, partition), so that a run's config, and so its
// checkpoint's fingerprint, names exactly the data it ran on: resuming
// needs the same data registered again. Registering equal contents twice
// gives the same key; each registration is undone by one Unregister.
std::string RegisterMemoryData(MemoryData data, const std::string& origin);
void UnregisterMemoryData(const std::string& key);

// The data registered under `key`; throws fedprof::Error naming
// data.memory_key when there is none.
std::shared_ptr<const MemoryData> FindMemoryData(const std::string& key);

}  // namespace fedprof

#endif  // FEDPROF_DATA_MEMORY_DATA_H_
