#ifndef FEDPROF_CORE_PARAMS_H_
#define FEDPROF_CORE_PARAMS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace fedprof {

// A model's state as one flat float32 vector: every parameter, then every
// floating-point buffer (batch-norm running statistics), in registration
// order. This is what travels between server and clients and what
// aggregation averages. Integer buffers (num_batches_tracked) stay local.
using FlatParams = std::vector<float>;

// Names and sizes of the flattened entries, in order; `is_buffer` marks
// buffers, `is_batch_norm` entries of batch-norm layers.
struct ParamLayout {
  struct Entry {
    std::string name;
    int64_t offset = 0;
    int64_t size = 0;
    bool is_buffer = false;
    bool is_batch_norm = false;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
};

ParamLayout LayoutOf(const torch::nn::Module& module);
FlatParams Flatten(const torch::nn::Module& module);
// Copies `flat` into the module's parameters and buffers; throws
// fedprof::Error if the size does not match the module.
void Unflatten(const FlatParams& flat, torch::nn::Module& module);

}  // namespace fedprof

#endif  // FEDPROF_CORE_PARAMS_H_
