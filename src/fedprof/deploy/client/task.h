#ifndef FEDPROF_DEPLOY_CLIENT_TASK_H_
#define FEDPROF_DEPLOY_CLIENT_TASK_H_

// How a deployment client receives a task: the PullTask stream's status,
// then the task's header and its model in chunks, each checked as it
// comes. For the deployment's own .cc files and tests.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "federation.grpc.pb.h"
#include "fedprof/deploy/shared/model_chunks.h"
#include "fedprof/protocol/messages.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// What a PullTask stream brought.
struct ReceivedTask {
  federation::v1::Status status = federation::v1::WAIT;
  bool got = false;  // a whole task
  FitInstructions instructions;
  int64_t task_id = 0;
  // The secure aggregation session the task's model goes to, if any.
  std::optional<secagg::SessionConfig> secagg;
  double secagg_wait_s = 0;
  std::string malformed;  // a server speaking another protocol, or a malformed task
  std::string refused;    // why this client will not take part in the task's session
  std::string run_id;     // the server's run, as it stated it at registration (32 bytes, or "")
};

// What a client checks a task's secure aggregation setup against: its own
// id, policy and keys.
struct TaskChecks {
  int64_t client_id = -1;
  SecAggPolicy policy;
  // Why this client has no secure aggregation keys, if so: a training task
  // with a session is then malformed for it.
  std::string keys_missing;
  // Every client's key as issued (tls.h's SecAggRoster), which the
  // session's keys must be; empty (plaintext): none to check them against.
  std::function<std::shared_ptr<const std::map<int64_t, std::string>>()> roster;
};

// One PullTask stream, chunk by chunk.
class TaskStream {
 public:
  explicit TaskStream(TaskChecks checks);

  // Takes the next chunk; whether more are to be read. Throws
  // fedprof::Error for a malformed header or model chunk.
  bool Take(const federation::v1::TaskChunk& chunk);
  // The stream was broken off for `why`.
  void Malformed(const std::string& why) { task_.malformed = why; }
  // What the stream brought, once it has ended.
  ReceivedTask Finish();

 private:
  void TakeHeader(const federation::v1::TaskHeader& header);
  // A training task's session, checked against this client's own demands.
  void TakeSecAgg(const federation::v1::TaskHeader& header);

  const TaskChecks checks_;
  int stage_ = 0;  // 0: the status, 1: the header, then the model's chunks
  ReceivedTask task_;
  std::optional<ModelChunks> model_;  // θ, then algorithm_values_ values
  size_t algorithm_values_ = 0;
};

// Starts a PullTask call for `request` that may last `deadline_s`: `on_read`
// runs as each message (or the stream's end) comes, `done` once the call has
// ended, with its status and what it brought. Both run on gRPC's threads.
void PullTask(federation::v1::Federation::Stub* stub, const federation::v1::PullRequest& request,
              double deadline_s, TaskChecks checks, std::function<void()> on_read,
              std::function<void(const grpc::Status&, ReceivedTask)> done);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_TASK_H_
