#include "fedprof/deploy/shared/model_chunks.h"

#include <algorithm>

#include "fedprof/protocol/wire.h"

namespace fedprof {

// What a sender states is not believed before it arrives: the storage grows
// with the chunks past the first 2^24 values.
constexpr size_t kMaxReservedValues = size_t{1} << 24;

ModelChunks::ModelChunks(size_t expected) : expected_(expected), model_(std::make_shared<FlatParams>()) {
  model_->reserve(std::min(expected_, kMaxReservedValues));
}

void ModelChunks::Add(const std::string& bytes) { AppendFloats(bytes, expected_, model_.get()); }

}  // namespace fedprof
