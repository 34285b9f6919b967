#include "fedprof/core/params.h"

#include <torch/torch.h>

#include <cstring>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

template <typename Fn>
void ForEachFloatTensor(const torch::nn::Module& module, Fn fn) {
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    fn(p.key(), p.value(), /*is_buffer=*/false);
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    if (b.value().scalar_type() == torch::kFloat) fn(b.key(), b.value(), true);
  }
}

bool IsBatchNormEntry(const torch::nn::Module& module, const std::string& name) {
  const auto dot = name.rfind('.');
  const std::string owner = dot == std::string::npos ? "" : name.substr(0, dot);
  for (const auto& m : module.named_modules()) {
    if (m.key() != owner) continue;
    const std::string type = m.value()->name();
    return type.find("BatchNorm") != std::string::npos;
  }
  return false;
}

}  // namespace

ParamLayout LayoutOf(const torch::nn::Module& module) {
  ParamLayout layout;
  ForEachFloatTensor(module, [&](const std::string& name, const torch::Tensor& t, bool is_buffer) {
    ParamLayout::Entry e;
    e.name = name;
    e.offset = layout.total;
    e.size = t.numel();
    e.is_buffer = is_buffer;
    e.is_batch_norm = IsBatchNormEntry(module, name);
    layout.total += e.size;
    layout.entries.push_back(std::move(e));
  });
  return layout;
}

FlatParams Flatten(const torch::nn::Module& module) {
  FlatParams flat;
  ForEachFloatTensor(module, [&](const std::string&, const torch::Tensor& t, bool) {
    const torch::Tensor c = t.detach().contiguous();
    const float* src = c.data_ptr<float>();
    flat.insert(flat.end(), src, src + c.numel());
  });
  return flat;
}

void Unflatten(const FlatParams& flat, torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  size_t offset = 0;
  ForEachFloatTensor(module, [&](const std::string& name, const torch::Tensor& t, bool) {
    const size_t n = static_cast<size_t>(t.numel());
    if (offset + n > flat.size()) {
      throw Error("model parameters: vector of " + std::to_string(flat.size()) +
                  " values is too short at '" + name + "'");
    }
    torch::Tensor dst = t;  // shares storage with the module's tensor
    if (dst.is_contiguous()) {
      std::memcpy(dst.data_ptr<float>(), flat.data() + offset, n * sizeof(float));
    } else {
      dst.copy_(torch::from_blob(const_cast<float*>(flat.data() + offset), t.sizes()));
    }
    offset += n;
  });
  if (offset != flat.size()) {
    throw Error("model parameters: got " + std::to_string(flat.size()) + " values, model has " +
                std::to_string(offset));
  }
}

}  // namespace fedprof
