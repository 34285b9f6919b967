#ifndef FEDPROF_FEDERATION_OPERATOR_SERVICE_H_
#define FEDPROF_FEDERATION_OPERATOR_SERVICE_H_

// The federation's side of its operators (proto/operator.proto, Operator):
// every call is an operator's, its certificate naming it operator-<name>;
// a node's or a relay's is refused in one line. An operator reads and stops
// the runs it submitted; an admin (federation serve --admin) every run, and
// it alone enrols and revokes nodes and reads the audit log. What an
// operator does, and every call refused it, is written to the audit log
// under its name. For the federation's parts only.

#include "fedprof/federation/federation_state.h"
#include "fedprof/federation/run_supervisor.h"
#include "operator.grpc.pb.h"

namespace fedprof::federation {

class OperatorService final : public pb::Operator::Service {
 public:
  OperatorService(FederationState* state, RunSupervisor* runs) : state_(state), runs_(runs) {}

  grpc::Status Submit(grpc::ServerContext* context, grpc::ServerReader<pb::SubmitChunk>* reader,
                      pb::RunInfo* reply) override;
  grpc::Status ListRuns(grpc::ServerContext* context, const pb::ListRunsRequest* request,
                        pb::RunList* reply) override;
  grpc::Status ShowRun(grpc::ServerContext* context, const pb::RunRequest* request, pb::RunInfo* reply) override;
  grpc::Status FollowLog(grpc::ServerContext* context, const pb::LogRequest* request,
                         grpc::ServerWriter<pb::LogLines>* writer) override;
  grpc::Status StopRun(grpc::ServerContext* context, const pb::RunRequest* request, pb::RunInfo* reply) override;
  grpc::Status Fetch(grpc::ServerContext* context, const pb::RunRequest* request,
                     grpc::ServerWriter<pb::FileChunk>* writer) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const pb::ListNodesRequest* request,
                         pb::NodeList* reply) override;
  grpc::Status Enrol(grpc::ServerContext* context, const pb::EnrolRequest* request, pb::NodeInfo* reply) override;
  grpc::Status Revoke(grpc::ServerContext* context, const pb::RevokeRequest* request,
                      pb::NodeInfo* reply) override;
  grpc::Status Audit(grpc::ServerContext* context, const pb::AuditRequest* request, pb::AuditList* reply) override;

  // Every run and every node as ListRuns and ListNodes answer them (the
  // monitor's view, which asks no operator).
  pb::RunList AllRuns();
  pb::NodeList AllNodes();

 private:
  // The calling operator ("operator-<name>"), or the refusal.
  grpc::Status Operator(const grpc::ServerContext& context, uint32_t version, std::string* name);
  // Whether operator `by` is one of the federation's --admin.
  bool Admin(const std::string& by) const;
  // An operator's call refused: in the audit log, and answered in one line.
  grpc::Status Refused(const std::string& by, const std::string& target, const std::string& why);
  // The calling operator, when an admin (`what` it may not do otherwise, to `target`).
  grpc::Status AdminCall(const grpc::ServerContext& context, uint32_t version, const std::string& what,
                         const std::string& target, std::string* by);
  // The calling operator, when it submitted run `run` or is an admin.
  grpc::Status RunCall(const grpc::ServerContext& context, uint32_t version, int64_t run, const std::string& what,
                       std::string* by);
  grpc::Status Describe(int64_t id, pb::RunInfo* info);
  void Describe(const NodeRecord& node, pb::NodeInfo* info);

  FederationState* const state_;
  RunSupervisor* const runs_;
};

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_OPERATOR_SERVICE_H_
