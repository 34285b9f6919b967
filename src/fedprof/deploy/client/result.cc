#include "fedprof/deploy/client/result.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "fedprof/deploy/shared/calls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;

ResultChunks::ResultChunks(const FitResult& result, const std::string& session, int64_t task_id,
                           double compute_s, size_t chunk_bytes)
    : result_(result),
      session_(session),
      task_id_(task_id),
      compute_s_(compute_s),
      per_chunk_(std::max<size_t>(1, chunk_bytes / sizeof(float))) {}

bool ResultChunks::Next(pb::ResultChunk* message) {
  message->Clear();
  if (!header_sent_) {
    header_sent_ = true;
    pb::ResultHeader* h = message->mutable_header();
    ToWire(result_, h);
    h->set_session(session_);
    h->set_task_id(task_id_);
    h->set_compute_s(compute_s_);
    h->set_profiling_s(result_.cost.profiling_time_s);
  } else {
    // The model, then the client algorithm's vector (SCAFFOLD's Δc_i).
    const size_t model = result_.params.size();
    const FlatParams& from = at_ < model ? result_.params : result_.algorithm_values;
    const size_t begin = at_ < model ? at_ : at_ - model;
    const size_t count = std::min(per_chunk_, from.size() - begin);
    PutFloats(from, begin, count, message->mutable_params());
    at_ += count;
  }
  return finished();
}

namespace {

// One PushResult call, on gRPC's callback API; it deletes itself when done.
class ClientPushCall final : public grpc::ClientWriteReactor<pb::ResultChunk> {
 public:
  ClientPushCall(pb::Federation::Stub* stub, ResultChunks chunks,
                 std::function<void(const grpc::Status&, const pb::PushReply&)> done)
      : done_(std::move(done)), chunks_(std::move(chunks)) {
    context_.set_deadline(In(120));
    stub->async()->PushResult(&context_, &reply_, this);
    Write();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok || chunks_.finished()) return;  // broken, or all written: OnDone follows
    Write();
  }

  void OnDone(const grpc::Status& status) override {
    done_(status, reply_);
    delete this;
  }

 private:
  void Write() {
    if (chunks_.Next(&message_)) {
      StartWriteLast(&message_, grpc::WriteOptions());
    } else {
      StartWrite(&message_);
    }
  }

  // First, so that what it holds (the client) outlives the call's context.
  const std::function<void(const grpc::Status&, const pb::PushReply&)> done_;
  ResultChunks chunks_;
  grpc::ClientContext context_;
  pb::ResultChunk message_;
  pb::PushReply reply_;
};

}  // namespace

void PushResult(pb::Federation::Stub* stub, ResultChunks chunks,
                std::function<void(const grpc::Status&, const pb::PushReply&)> done) {
  new ClientPushCall(stub, std::move(chunks), std::move(done));
}

}  // namespace fedprof
