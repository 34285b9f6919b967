#ifndef FEDPROF_DEPLOY_CLIENT_RESULT_H_
#define FEDPROF_DEPLOY_CLIENT_RESULT_H_

// How a deployment client sends a result: the PushResult stream's header,
// then the model in chunks of the size the server asked for. For the
// deployment's own .cc files and tests.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "federation.grpc.pb.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

// The messages of one PushResult stream, in order; the last one closes it.
class ResultChunks {
 public:
  // `result` is read as the messages are made: it must outlive them.
  // `session` and `task_id` name the task, `compute_s` how long it took.
  ResultChunks(const FitResult& result, const std::string& session, int64_t task_id, double compute_s,
               size_t chunk_bytes);

  // Sets `message` to the next message (the header first); whether it is
  // the last.
  bool Next(federation::v1::ResultChunk* message);
  // Every message has been made.
  bool finished() const {
    return header_sent_ && at_ >= result_.params.size() + result_.algorithm_values.size();
  }

 private:
  const FitResult& result_;
  const std::string session_;
  const int64_t task_id_;
  const double compute_s_;
  const size_t per_chunk_;  // model values
  bool header_sent_ = false;
  size_t at_ = 0;  // model values in messages made
};

// Starts a PushResult call of `chunks`' messages; `done` runs on gRPC's
// thread once the call has ended, with its status and the server's reply.
void PushResult(federation::v1::Federation::Stub* stub, ResultChunks chunks,
                std::function<void(const grpc::Status&, const federation::v1::PushReply&)> done);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_RESULT_H_
