#ifndef FEDPROF_FEDERATION_NODE_SERVICE_H_
#define FEDPROF_FEDERATION_NODE_SERVICE_H_

// The federation's side of its nodes (proto/operator.proto, Nodes): a node
// says what it runs and what its policy refused, and hears which runs are
// open to it. On gRPC's callback API: a node's sync that waits for the runs
// to change is parked, holding no thread, so that a fleet of idle nodes
// costs the federation memory only. For the federation's parts only.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fedprof/federation/federation_state.h"
#include "operator.grpc.pb.h"

namespace fedprof::federation {

class NodeService final : public pb::Nodes::CallbackService {
 public:
  explicit NodeService(FederationState* state);
  ~NodeService() override;

  // Answers every parked sync, and every later one at once: before the
  // server shuts down, which waits for every call to end.
  void Stop();

  grpc::ServerUnaryReactor* Sync(grpc::CallbackServerContext* context, const pb::NodeSyncRequest* request,
                                 pb::NodeSyncReply* reply) override;

 private:
  struct Parked {
    grpc::ServerUnaryReactor* call;
    pb::NodeSyncReply* reply;
    int id;
    std::chrono::steady_clock::time_point deadline;
  };

  grpc::Status Admit(const grpc::CallbackServerContext& context, const pb::NodeSyncRequest& request);
  void Record(const pb::NodeSyncRequest& request);
  void Answer(const Parked& parked);
  void AnswerAll(bool expired_only);

  FederationState* const state_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Parked> parked_;
  bool stopping_ = false;
  std::thread waker_;  // answers the syncs whose wait ended
};

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_NODE_SERVICE_H_
