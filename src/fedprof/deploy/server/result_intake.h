#ifndef FEDPROF_DEPLOY_SERVER_RESULT_INTAKE_H_
#define FEDPROF_DEPLOY_SERVER_RESULT_INTAKE_H_

// A client's result (PushResult): its header, checked before anything of
// it is believed, then its model chunks, one read at a time, each checked;
// then the round loop's verdict, which is the reply. Every check the server
// can make happens before it answers: the header and its numbers (wire.h),
// the task it answers, the sample count against the registered one, the
// model's size, then the round loop's own checks (Server::Validate, the
// strategy's). `accepted` means the result counts in its round.

#include <grpcpp/grpcpp.h>

#include "fedprof/deploy/server/client_registry.h"
#include "fedprof/deploy/server/round.h"
#include "fedprof/deploy/server/service_state.h"

namespace fedprof::deploy {

class ResultIntake {
 public:
  ResultIntake(ServiceState* state, ClientRegistry* registry, Round* round)
      : state_(*state), registry_(*registry), round_(*round) {}

  // The PushResult handler's reactor.
  grpc::ServerReadReactor<pb::ResultChunk>* Start(grpc::CallbackServerContext* context, pb::PushReply* reply);

  // What a PushResult has learnt of its result so far.
  struct PushState {
    int id = -1;
    Task task;
    int64_t registered = 0;
    size_t expected = 0;  // values: the model's, then the client algorithm's vector
    size_t algorithm_values = 0;  // of them the client algorithm's (SCAFFOLD's Δc_i)
    FitResult result;
    std::string why;  // why it is refused on arrival; "" = so far so good
  };

  // A result's header: sets *read_on when the model chunks are to be read;
  // otherwise the call ends with the returned status (and `reply`).
  grpc::Status Begin(const grpc::CallbackServerContext& context, const pb::ResultHeader& header,
                     pb::PushReply* reply, PushState* state, bool* read_on);
  // One model chunk of a result, checked.
  void AddChunk(const pb::ResultChunk& chunk, PushState* state) const;
  // Hands a read result to the round loop, whose verdict answers `verdict`.
  // False when the call is to end now (its reply says why).
  bool Deliver(const pb::ResultHeader& header, PushState state, Verdict verdict);
  // A result whose first message is not a header.
  grpc::Status RefuseHeaderless(const grpc::CallbackServerContext& context);

  Round& round() { return round_; }

 private:
  // A result refused before its task was looked up: logged, and its task
  // (if open) counts it as refused.
  grpc::Status Refuse(int id, const std::string& why, pb::PushReply* reply);
  // Looks up the open task `header` answers (state->task); "" when there is
  // one, else the reply's reason. (mutex held)
  std::string FindTask(int id, const pb::ResultHeader& header, PushState* state);

  ServiceState& state_;
  ClientRegistry& registry_;
  Round& round_;
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_RESULT_INTAKE_H_
