#ifndef FEDPROF_DEPLOY_SHARED_MODEL_CHUNKS_H_
#define FEDPROF_DEPLOY_SHARED_MODEL_CHUNKS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "fedprof/protocol/messages.h"

namespace fedprof {

// A model that arrives as chunks of float32 after a header that states its
// size (a client's task, a relay's batch): each chunk is checked as it
// comes, and the model counts only once whole.
class ModelChunks {
 public:
  explicit ModelChunks(size_t expected);

  // Appends a chunk's values. Throws fedprof::Error for a chunk that is not
  // whole floats or that would take the model past the size stated.
  void Add(const std::string& bytes);

  size_t expected() const { return expected_; }
  bool whole() const { return model_->size() == expected_; }
  // The model as far as it came, once: the last call.
  std::shared_ptr<FlatParams> Take() { return std::move(model_); }

 private:
  size_t expected_;
  std::shared_ptr<FlatParams> model_;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SHARED_MODEL_CHUNKS_H_
