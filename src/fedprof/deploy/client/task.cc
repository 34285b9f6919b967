#include "fedprof/deploy/client/task.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/deploy/shared/calls.h"
#include "fedprof/deploy/shared/secagg_setup.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;

TaskStream::TaskStream(TaskChecks checks) : checks_(std::move(checks)) {}

bool TaskStream::Take(const pb::TaskChunk& chunk) {
  switch (stage_++) {
    case 0:  // the status
      if (!chunk.has_status()) return false;
      task_.status = chunk.status();
      return task_.status == pb::TASK;
    case 1:  // the header
      if (!chunk.has_header()) return false;
      TakeHeader(chunk.header());
      return true;
    default:  // the model's chunks
      if (!chunk.has_params()) return false;
      model_->Add(chunk.params());
      return true;
  }
}

void TaskStream::TakeHeader(const pb::TaskHeader& header) {
  task_.instructions = FromWire(header);
  task_.task_id = header.task_id();
  if (header.has_secagg() && task_.instructions.train.epochs > 0) TakeSecAgg(header);
  // θ, then the algorithm's broadcast of θ's size (SCAFFOLD's c), in one run of chunks.
  const int64_t extra = header.num_algorithm_values();
  if (extra != 0 && extra != header.num_params()) {
    throw Error("task: " + std::to_string(extra) + " client algorithm values for a model of " +
                std::to_string(header.num_params()));
  }
  algorithm_values_ = static_cast<size_t>(extra);
  model_.emplace(static_cast<size_t>(header.num_params() + extra));
}

void TaskStream::TakeSecAgg(const pb::TaskHeader& header) {
  if (!checks_.keys_missing.empty()) throw Error(checks_.keys_missing);
  const auto roster = checks_.roster ? checks_.roster() : nullptr;
  try {
    const auto length =
        static_cast<int64_t>(SessionLength(task_.instructions, static_cast<size_t>(header.num_params())));
    task_.secagg = SetupFromWire(header.secagg(), length, checks_.client_id, task_.instructions.round,
                                 checks_.policy, roster.get(), SessionWordBits(task_.instructions));
    task_.secagg_wait_s = header.secagg().reply_wait_s();
  } catch (const Error& e) {
    task_.refused = std::string("refused the server's secure aggregation: ") + e.what();
  }
}

ReceivedTask TaskStream::Finish() {
  if (model_) {
    task_.got = model_->whole();
    std::shared_ptr<FlatParams> values = model_->Take();
    model_.reset();
    if (algorithm_values_ > 0 && task_.got) {
      task_.instructions.algorithm_values =
          std::make_shared<const FlatParams>(TakeAlgorithmValues(values.get(), algorithm_values_));
    }
    task_.instructions.global = std::move(values);
  }
  return std::move(task_);
}

namespace {

// One PullTask call, on gRPC's callback API; it deletes itself when done.
class ClientPullCall final : public grpc::ClientReadReactor<pb::TaskChunk> {
 public:
  ClientPullCall(pb::Federation::Stub* stub, const pb::PullRequest& request, double deadline_s,
                 TaskChecks checks, std::function<void()> on_read,
                 std::function<void(const grpc::Status&, ReceivedTask)> done)
      : on_read_(std::move(on_read)), done_(std::move(done)), request_(request), stream_(std::move(checks)) {
    context_.set_deadline(In(deadline_s));
    stub->async()->PullTask(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    on_read_();
    if (!ok) return;  // OnDone follows
    bool more = false;
    try {
      more = stream_.Take(chunk_);
    } catch (const Error& e) {
      stream_.Malformed(e.what());
      context_.TryCancel();
      return;
    }
    if (more) StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    done_(status, stream_.Finish());
    delete this;
  }

 private:
  // First, so that what they hold (the client) outlives the call's context.
  const std::function<void()> on_read_;
  const std::function<void(const grpc::Status&, ReceivedTask)> done_;
  grpc::ClientContext context_;
  const pb::PullRequest request_;
  pb::TaskChunk chunk_;
  TaskStream stream_;
};

}  // namespace

void PullTask(pb::Federation::Stub* stub, const pb::PullRequest& request, double deadline_s,
              TaskChecks checks, std::function<void()> on_read,
              std::function<void(const grpc::Status&, ReceivedTask)> done) {
  new ClientPullCall(stub, request, deadline_s, std::move(checks), std::move(on_read), std::move(done));
}

}  // namespace fedprof
