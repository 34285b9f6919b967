#include "fedprof/federation/operator_client.h"

#include <dirent.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"
#include "operator.grpc.pb.h"

namespace fedprof::federation {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

Error Refused(const OperatorIdentity& who, const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Error("cannot reach the federation at " + who.server + ": " + Printable(status.error_message(), 300));
  }
  return Error("the federation refused: " + Printable(status.error_message(), 1000));
}

void Deadline(grpc::ClientContext* context, int seconds) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

}  // namespace

std::string OnlyOperator(const std::string& tls_dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(tls_dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      const std::string file = entry->d_name;
      const std::string prefix = "operator-", suffix = ".crt";
      if (file.size() > prefix.size() + suffix.size() && file.compare(0, prefix.size(), prefix) == 0 &&
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
        names.push_back(file.substr(prefix.size(), file.size() - prefix.size() - suffix.size()));
      }
    }
    ::closedir(d);
  }
  if (names.size() == 1) return names.front();
  throw Error("--tls-dir " + tls_dir + ": " +
              (names.empty() ? std::string("no operator-<name>.crt (scripts/make-certs.sh --operator NAME)")
                             : std::to_string(names.size()) + " operator certificates; give --operator NAME"));
}

class OperatorClient::Impl {
 public:
  explicit Impl(const OperatorIdentity& identity) : who(identity) {
    grpc::ChannelArguments args;
    ExpectPeer(who.tls_dir, "server", &args);
    const std::string name = who.name.empty() && !who.insecure ? OnlyOperator(who.tls_dir) : who.name;
    stub = pb::Operator::NewStub(grpc::CreateCustomChannel(
        who.server,
        who.insecure ? grpc::InsecureChannelCredentials() : ClientCredentials(who.tls_dir, "operator-" + name),
        args));
  }
  // One unary call of `method`, within 30 s: its reply, or the refusal thrown.
  template <typename Request, typename Reply>
  Reply Call(grpc::Status (pb::Operator::Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
             Request request) {
    grpc::ClientContext context;
    Deadline(&context, 30);
    request.set_protocol_version(kProtocolVersion);
    Reply reply;
    const grpc::Status status = (stub.get()->*method)(&context, request, &reply);
    if (!status.ok()) throw Refused(who, status);
    return reply;
  }

  const OperatorIdentity who;
  std::unique_ptr<pb::Operator::Stub> stub;
};

namespace {

pb::RunRequest RunRequestOf(int64_t run) {
  pb::RunRequest request;
  request.set_run(run);
  return request;
}

}  // namespace

OperatorClient::OperatorClient(const OperatorIdentity& identity) : impl_(std::make_unique<Impl>(identity)) {}
OperatorClient::~OperatorClient() = default;

pb::RunInfo OperatorClient::Submit(const std::string& config, const std::string& name, const std::string& model) {
  grpc::ClientContext context;
  Deadline(&context, 600);
  pb::RunInfo reply;
  auto writer = impl_->stub->Submit(&context, &reply);
  pb::SubmitChunk chunk;
  pb::SubmitHeader* header = chunk.mutable_header();
  header->set_protocol_version(kProtocolVersion);
  header->set_config(config);
  header->set_name(name);
  header->set_model_bytes(static_cast<int64_t>(model.size()));
  if (!model.empty()) header->set_model_sha256(Sha256Hex(model));
  bool sent = writer->Write(chunk);
  for (size_t at = 0; sent && at < model.size(); at += kChunkBytes) {
    pb::SubmitChunk part;
    part.set_model(model.substr(at, kChunkBytes));
    sent = writer->Write(part);
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) throw Refused(impl_->who, status);
  return reply;
}

std::vector<pb::RunInfo> OperatorClient::Runs() {
  const pb::RunList reply = impl_->Call(&pb::Operator::Stub::ListRuns, pb::ListRunsRequest());
  return {reply.runs().begin(), reply.runs().end()};
}

pb::RunInfo OperatorClient::Show(int64_t run) {
  return impl_->Call(&pb::Operator::Stub::ShowRun, RunRequestOf(run));
}

void OperatorClient::Log(int64_t run, int64_t from, bool follow,
                         const std::function<void(const std::string&)>& line) {
  grpc::ClientContext context;
  if (!follow) Deadline(&context, 60);
  pb::LogRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_run(run);
  request.set_from(from);
  request.set_follow(follow);
  auto reader = impl_->stub->FollowLog(&context, request);
  pb::LogLines lines;
  while (reader->Read(&lines)) {
    for (const std::string& l : lines.lines()) line(l);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) throw Refused(impl_->who, status);
}

pb::RunInfo OperatorClient::Stop(int64_t run) {
  return impl_->Call(&pb::Operator::Stub::StopRun, RunRequestOf(run));
}

std::vector<std::string> OperatorClient::Fetch(int64_t run, const std::string& dir) {
  grpc::ClientContext context;
  Deadline(&context, 600);
  pb::RunRequest request = RunRequestOf(run);
  request.set_protocol_version(kProtocolVersion);
  auto reader = impl_->stub->Fetch(&context, request);
  std::vector<std::string> names;
  std::string name, data;
  int64_t size = 0;
  const auto finish = [&] {
    if (name.empty()) return;
    if (static_cast<int64_t>(data.size()) != size) throw Error("fetch: " + name + " arrived cut short");
    WriteFileAtomic(dir + "/" + name, data);
    names.push_back(name);
  };
  MakeDirs(dir);
  pb::FileChunk chunk;
  while (reader->Read(&chunk)) {
    if (!chunk.name().empty()) {
      finish();
      // A name is a plain file name of the run's folder, nothing else.
      if (chunk.name().find('/') != std::string::npos || chunk.name()[0] == '.' ||
          !TextProblem(chunk.name()).empty()) {
        throw Error("fetch: the federation sent a file named '" + Printable(chunk.name(), 100) + "'");
      }
      name = chunk.name();
      size = chunk.size();
      data.clear();
    }
    if (name.empty()) throw Error("fetch: a file's bytes before its name");
    if (static_cast<int64_t>(data.size() + chunk.data().size()) > size) {
      throw Error("fetch: " + name + " arrived longer than its " + std::to_string(size) + " bytes");
    }
    data += chunk.data();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) throw Refused(impl_->who, status);
  finish();
  return names;
}

std::vector<pb::NodeInfo> OperatorClient::Nodes() {
  const pb::NodeList reply = impl_->Call(&pb::Operator::Stub::ListNodes, pb::ListNodesRequest());
  return {reply.nodes().begin(), reply.nodes().end()};
}

pb::NodeInfo OperatorClient::Enrol(const std::string& certificate_pem) {
  pb::EnrolRequest request;
  request.set_certificate(certificate_pem);
  return impl_->Call(&pb::Operator::Stub::Enrol, request);
}

pb::NodeInfo OperatorClient::Revoke(int node, const std::string& reason) {
  pb::RevokeRequest request;
  request.set_node(node);
  request.set_reason(reason);
  return impl_->Call(&pb::Operator::Stub::Revoke, request);
}

std::vector<pb::AuditEntry> OperatorClient::Audit(int64_t after) {
  std::vector<pb::AuditEntry> all;
  // The federation answers a page at a time: ask again after the last.
  for (;;) {
    pb::AuditRequest request;
    request.set_after(after);
    const pb::AuditList reply = impl_->Call(&pb::Operator::Stub::Audit, request);
    if (reply.entries().empty()) return all;
    all.insert(all.end(), reply.entries().begin(), reply.entries().end());
    after = reply.entries().rbegin()->seq();
  }
}

}  // namespace fedprof::federation
