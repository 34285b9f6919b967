#include "fedprof/client/local_state.h"

#include <algorithm>

#include "fedprof/core/error.h"

namespace fedprof {

TrainingStart StartOfTraining(const LocalObjective& objective, const ParamLayout& layout,
                              const FlatParams& kept, const FlatParams& global) {
  TrainingStart start;
  if (!objective.keep_local_batch_norm) return start;
  int64_t kept_size = 0;
  for (const auto& e : layout.entries) {
    if (!e.is_batch_norm) continue;
    start.batch_norm.emplace_back(e.offset, e.size);
    kept_size += e.size;
  }
  if (start.batch_norm.empty() || kept.empty()) return start;
  if (static_cast<int64_t>(kept.size()) != kept_size ||
      static_cast<int64_t>(global.size()) != layout.total) {
    throw Error("local batch norm of " + std::to_string(kept.size()) + " values for a model with " +
                std::to_string(kept_size) + " batch-norm values");
  }
  start.from_own = true;
  start.own = global;
  size_t at = 0;
  for (const auto& [offset, size] : start.batch_norm) {
    std::copy_n(kept.begin() + static_cast<int64_t>(at), size, start.own.begin() + offset);
    at += static_cast<size_t>(size);
  }
  return start;
}

FlatParams LocalStateAfter(const TrainingStart& start, const FlatParams& trained) {
  FlatParams kept;
  for (const auto& [offset, size] : start.batch_norm) {
    kept.insert(kept.end(), trained.begin() + offset, trained.begin() + offset + size);
  }
  return kept;
}

}  // namespace fedprof
