#ifndef FEDPROF_DEPLOY_SERVER_RELAY_HUB_H_
#define FEDPROF_DEPLOY_SERVER_RELAY_HUB_H_

// The server's side of its relays (`fedprof relay`): their syncs (who each
// serves now), their batch requests, their clients' results (without
// models) and their partial sums of the accepted results' models. A relay
// is trusted with its clients' identities (it checks their certificates)
// and with their models (it sums them); everything it sends is checked as
// a client's would be: sizes, numbers, sessions, which of its clients have
// open tasks, and that its sums are of what it names.

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "fedprof/deploy/server/client_registry.h"
#include "fedprof/deploy/server/round.h"
#include "fedprof/deploy/server/service_state.h"
#include "fedprof/deploy/server/task_streams.h"

namespace fedprof::deploy {

class RelayHub {
 public:
  RelayHub(ServiceState* state, ClientRegistry* registry, TaskStreams* streams, Round* round);

  // A relay's sync: who it serves now. Each client it names is checked as a
  // registration would be; those it may not serve are named in the reply.
  grpc::Status Sync(const grpc::CallbackServerContext& context, const pb::RelaySyncRequest& request,
                    pb::RelaySyncReply* reply);
  // A relay's batch request: its batch of the round, once, or its status
  // when there is none (parked while it waits).
  grpc::ServerWriteReactor<pb::RelayTaskChunk>* Pull(grpc::CallbackServerContext* context,
                                                     const pb::RelayPullRequest& request);
  // A relay's result: the same checks as a client's PushResult (wire.h, the
  // open task, the registered sample count), and no model (its model goes
  // into the relay's sum once the result is accepted). Sets *judged when the
  // result went to the round loop, whose verdict ends `call`.
  grpc::Status TakeResult(const grpc::CallbackServerContext& context, const pb::RelayResultRequest& request,
                          pb::PushReply* reply, grpc::ServerUnaryReactor* call, bool* judged);
  // The RelaySum handler's reactor.
  grpc::ServerReadReactor<pb::RelaySumChunk>* StartSum(grpc::CallbackServerContext* context,
                                                       pb::PushReply* reply);

  // What a RelaySum has learnt of its sum so far.
  struct SumState {
    int relay = -1;
    int64_t batch = 0;
    std::vector<size_t> indices;
    size_t expected = 0;  // bytes
    std::string bytes;
  };
  // A relay's sum header: its batch, the clients it names (each with a task
  // in the batch, once) and its size, which must be that of a sum of this
  // model.
  grpc::Status BeginSum(const grpc::CallbackServerContext& context, const pb::RelaySumHeader& header,
                        SumState* state);
  // Relay `r`'s sum header, checked against the round: the part of BeginSum
  // after the relay is known. (mutex held)
  grpc::Status CheckSumHeader(int r, const pb::RelaySumHeader& header, SumState* state);
  // A relay's sum, read whole: the round loop judges it (ModelSum::Parse
  // first checks it is a sum that its count of models could make); one
  // refused is lost to the round with its reason.
  void DeliverSum(SumState state, Verdict verdict);

  Round& round() { return round_; }

 private:
  // The checks of a relayed result's numbers against its task; "" or why it
  // is refused. (mutex not held)
  static std::string CheckRelayedResult(const pb::ResultHeader& header, int64_t registered);
  // The open task (*task) of relay `r`'s client that `request` answers, and
  // its registered sample count; "" when there is one, else the reply's
  // reason. (mutex held)
  std::string FindTask(int r, const pb::RelayResultRequest& request, Task* task, int64_t* registered);
  // The relayed result of client `id`, unrefused, as the round loop gets it.
  static FitResult Judged(int id, const pb::ResultHeader& header, FitResult result, const Task& task,
                          int64_t registered, double elapsed);

  ServiceState& state_;
  ClientRegistry& registry_;
  TaskStreams& streams_;
  Round& round_;
  const size_t sum_bytes_;  // of a partial sum of this model (ModelSum::Serialize)
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_RELAY_HUB_H_
