#include "fedprof/federation/operator_service.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "fedprof/config/config.h"
#include "fedprof/config/paths.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::federation {
namespace {

constexpr size_t kMaxConfigBytes = size_t{1} << 20;
constexpr int64_t kMaxModelBytes = int64_t{256} << 20;
constexpr size_t kChunkBytes = size_t{1} << 20;
constexpr int kMaxLinesPerMessage = 256;
constexpr size_t kMaxLineBytes = 4096;
constexpr size_t kMaxLogBytes = 256 * 1024;
// Audit entries a call returns; the caller asks again after the last one.
constexpr size_t kMaxAuditEntries = 1000;
constexpr size_t kMaxNameBytes = 100;

grpc::Status Invalid(const std::string& why) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why); }

// The regular files of `dir`, by name.
std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    struct stat info {};
    if (name[0] != '.' && ::stat((dir + "/" + name).c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        name.find(".tmp") == std::string::npos) {
      names.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

grpc::Status OperatorService::Operator(const grpc::ServerContext& context, uint32_t version, std::string* name) {
  const std::string mismatch = ProtocolMismatch(version, "the operator");
  if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
  if (!state_->tls()) {
    *name = "operator-local";  // --insecure: loopback, and no one to tell apart
    return grpc::Status::OK;
  }
  const CertifiedPeer peer = CertifiedClient(context);
  if (peer.operator_name.empty()) {
    const std::string who = peer.id >= 0      ? "client " + std::to_string(peer.id) + "'s"
                            : peer.relay >= 0 ? "relay " + std::to_string(peer.relay) + "'s"
                                              : peer.problem;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "only an operator's certificate (operator-<name>) may make an operator's calls; this is " +
                            who);
  }
  *name = "operator-" + peer.operator_name;
  return grpc::Status::OK;
}

bool OperatorService::Admin(const std::string& by) const {
  if (!state_->tls()) return true;  // --insecure: operator-local, the one there is
  const std::vector<std::string>& admins = state_->options().admins;
  return std::any_of(admins.begin(), admins.end(), [&](const std::string& a) { return "operator-" + a == by; });
}

grpc::Status OperatorService::Refused(const std::string& by, const std::string& target, const std::string& why) {
  state_->store().Audit(by, "refused", target, why);
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, why);
}

grpc::Status OperatorService::AdminCall(const grpc::ServerContext& context, uint32_t version, const std::string& what,
                                        const std::string& target, std::string* by) {
  const grpc::Status refused = Operator(context, version, by);
  if (!refused.ok()) return refused;
  if (Admin(*by)) return grpc::Status::OK;
  return Refused(*by, target, *by + " may not " + what + ": that is an admin's (federation serve --admin)");
}

grpc::Status OperatorService::RunCall(const grpc::ServerContext& context, uint32_t version, int64_t run,
                                      const std::string& what, std::string* by) {
  const grpc::Status refused = Operator(context, version, by);
  if (!refused.ok()) return refused;
  const std::optional<RunRecord> record = state_->store().Run(run);
  if (!record) return grpc::Status(grpc::StatusCode::NOT_FOUND, "there is no run " + std::to_string(run));
  if (record->submitted_by == *by || Admin(*by)) return grpc::Status::OK;
  return Refused(*by, "run-" + std::to_string(run),
                 *by + " may not " + what + " run " + std::to_string(run) +
                     ": another operator submitted it (its submitter or an admin may)");
}

grpc::Status OperatorService::Submit(grpc::ServerContext* context, grpc::ServerReader<pb::SubmitChunk>* reader,
                                     pb::RunInfo* reply) {
  pb::SubmitChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) return Invalid("a submission starts with its header");
  const pb::SubmitHeader header = chunk.header();
  std::string by;
  grpc::Status refused = Operator(*context, header.protocol_version(), &by);
  if (!refused.ok()) return refused;
  if (header.config().size() > kMaxConfigBytes) return Invalid("a config over 1 MiB");
  if (header.model_bytes() < 0 || header.model_bytes() > kMaxModelBytes) {
    return Invalid("a model file of " + std::to_string(header.model_bytes()) + " bytes (at most 256 MiB)");
  }
  std::string model;
  model.reserve(static_cast<size_t>(header.model_bytes()));
  while (reader->Read(&chunk)) {
    if (!chunk.has_model() || chunk.model().size() > kChunkBytes ||
        static_cast<int64_t>(model.size() + chunk.model().size()) > header.model_bytes()) {
      return Invalid("the model file's chunks are not the " + std::to_string(header.model_bytes()) +
                     " bytes the header announced, in chunks of at most 1 MiB");
    }
    model += chunk.model();
  }
  if (static_cast<int64_t>(model.size()) != header.model_bytes()) {
    return Invalid("the model file came with " + std::to_string(model.size()) + " of its " +
                   std::to_string(header.model_bytes()) + " bytes");
  }
  RunRecord record;
  try {
    Config config;
    config.MergeTomlString(header.config(), "the submitted config");
    if (!config.options().model.file.empty() && model.empty()) {
      return Invalid("the config names model.file " + Printable(config.options().model.file, 200) +
                     ": submit the file with it (fedprof federation submit sends it)");
    }
    // A run's config is the submitter's: it names no file of this machine
    // outside the federation's data roots, and no keys at all.
    std::string outside = config.options().dp.key_dir.empty()
                              ? PathRefusal(config, state_->options().data_roots, "the federation's --data-root",
                                            {"model.file", "dp.key_dir"})
                              : "dp.key_dir: a federation's run uses the federation's keys, and each node its own; "
                                "leave it empty";
    if (!outside.empty()) return Refused(by, "submit", outside);
    record.config = config.ToToml();
    record.strategy = config.options().strategy.name;
    record.rounds = config.options().rounds;
  } catch (const Error& e) {
    return Invalid(e.what());
  }
  if (!model.empty()) {
    record.model_sha256 = Sha256Hex(model);
    if (record.model_sha256 != header.model_sha256()) {
      return Invalid("the model file's SHA-256 is " + record.model_sha256 + ", the header says " +
                     Printable(header.model_sha256(), 64));
    }
  }
  record.name = Printable(header.name().empty() ? "run" : header.name(), kMaxNameBytes);
  record.submitted_by = by;
  try {
    return Describe(runs_->Submit(record, model), reply);
  } catch (const Error& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

grpc::Status OperatorService::Describe(int64_t id, pb::RunInfo* info) {
  const std::optional<RunRecord> run = state_->store().Run(id);
  if (!run) return grpc::Status(grpc::StatusCode::NOT_FOUND, "there is no run " + std::to_string(id));
  info->set_protocol_version(kProtocolVersion);
  info->set_run(run->id);
  info->set_name(run->name);
  info->set_state(run->state);
  info->set_detail(run->detail);
  info->set_submitted_by(run->submitted_by);
  info->set_submitted_at(run->submitted_at);
  info->set_started_at(run->started_at);
  info->set_finished_at(run->finished_at);
  info->set_rounds(run->rounds);
  info->set_strategy(run->strategy);
  info->set_address(run->address);
  const auto [done, accuracy] = runs_->Progress(id);
  info->set_rounds_done(done);
  info->set_accuracy(accuracy);
  for (const RefusalRecord& r : state_->store().Refusals(id)) {
    pb::NodeRefusalInfo* refusal = info->add_refusals();
    refusal->set_node(r.node);
    refusal->set_rule(r.rule);
    refusal->set_at(r.at);
  }
  for (const int node : state_->store().ServedBy(id)) info->add_nodes(node);
  return grpc::Status::OK;
}

grpc::Status OperatorService::ListRuns(grpc::ServerContext* context, const pb::ListRunsRequest* request,
                                       pb::RunList* reply) {
  std::string by;
  const grpc::Status refused = Operator(*context, request->protocol_version(), &by);
  if (!refused.ok()) return refused;
  *reply = AllRuns();
  if (!Admin(by)) {
    // Another operator's runs are not listed.
    auto* runs = reply->mutable_runs();
    const auto others = [&](const pb::RunInfo& r) { return r.submitted_by() != by; };
    runs->erase(std::remove_if(runs->begin(), runs->end(), others), runs->end());
  }
  return grpc::Status::OK;
}

pb::RunList OperatorService::AllRuns() {
  pb::RunList list;
  list.set_protocol_version(kProtocolVersion);
  for (const RunRecord& run : state_->store().Runs()) Describe(run.id, list.add_runs());
  return list;
}

grpc::Status OperatorService::ShowRun(grpc::ServerContext* context, const pb::RunRequest* request,
                                      pb::RunInfo* reply) {
  std::string by;
  const grpc::Status refused = RunCall(*context, request->protocol_version(), request->run(), "read", &by);
  if (!refused.ok()) return refused;
  return Describe(request->run(), reply);
}

grpc::Status OperatorService::FollowLog(grpc::ServerContext* context, const pb::LogRequest* request,
                                        grpc::ServerWriter<pb::LogLines>* writer) {
  std::string by;
  const grpc::Status refused = RunCall(*context, request->protocol_version(), request->run(), "read the log of", &by);
  if (!refused.ok()) return refused;
  if (request->from() < 0) return Invalid("from " + std::to_string(request->from()));
  const std::string path = RunDir(state_->options().state_dir, request->run()) + "/log.txt";
  // Read from where the last read ended (a byte offset), a whole line at a
  // time, each message at most kMaxLogBytes.
  int64_t next = 0;
  std::streamoff offset = 0;
  std::string partial;
  while (!context->IsCancelled()) {
    // Read before looking at the state: lines written before it ended are
    // all sent.
    std::ifstream in(path, std::ios::binary);
    in.seekg(offset);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset += static_cast<std::streamoff>(chunk.size());
    const bool ended = Ended(state_->store().Run(request->run())->state);
    partial += chunk;
    pb::LogLines message;
    size_t bytes = 0, start = 0;
    for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
      if (next++ < request->from()) continue;
      message.add_lines(Printable(partial.substr(start, end - start), kMaxLineBytes));
      bytes += message.lines(message.lines_size() - 1).size();
      if (message.lines_size() == kMaxLinesPerMessage || bytes > kMaxLogBytes) {
        message.set_next(next);
        if (!writer->Write(message)) return grpc::Status::OK;
        message.Clear();
        bytes = 0;
      }
    }
    partial.erase(0, start);
    if (message.lines_size() > 0) {
      message.set_next(next);
      if (!writer->Write(message)) return grpc::Status::OK;
    }
    if (!request->follow() || ended) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return grpc::Status::OK;
}

grpc::Status OperatorService::StopRun(grpc::ServerContext* context, const pb::RunRequest* request,
                                      pb::RunInfo* reply) {
  std::string by;
  const grpc::Status refused = RunCall(*context, request->protocol_version(), request->run(), "stop", &by);
  if (!refused.ok()) return refused;
  const std::string problem = runs_->Stop(request->run(), by);
  if (!problem.empty()) {
    const bool missing = problem.rfind("there is no run", 0) == 0;
    return grpc::Status(missing ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::FAILED_PRECONDITION, problem);
  }
  return Describe(request->run(), reply);
}

grpc::Status OperatorService::Fetch(grpc::ServerContext* context, const pb::RunRequest* request,
                                    grpc::ServerWriter<pb::FileChunk>* writer) {
  std::string by;
  const grpc::Status refused = RunCall(*context, request->protocol_version(), request->run(), "fetch", &by);
  if (!refused.ok()) return refused;
  const std::string out = RunDir(state_->options().state_dir, request->run()) + "/out";
  for (const std::string& name : FilesIn(out)) {
    // A chunk in memory at a time; a file that cannot be read whole ends
    // the call with why.
    std::ifstream in(out + "/" + name, std::ios::binary | std::ios::ate);
    const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
    if (size < 0) return grpc::Status(grpc::StatusCode::INTERNAL, out + "/" + name + ": cannot be read");
    in.seekg(0);
    std::streamoff sent = 0;
    std::string data(kChunkBytes, '\0');
    do {
      const std::streamoff n = std::min<std::streamoff>(static_cast<std::streamoff>(kChunkBytes), size - sent);
      if (!in.read(data.data(), n)) {
        return grpc::Status(grpc::StatusCode::INTERNAL, out + "/" + name + ": cannot be read");
      }
      pb::FileChunk chunk;
      if (sent == 0) {
        chunk.set_name(name);
        chunk.set_size(static_cast<int64_t>(size));
      }
      chunk.set_data(data.data(), static_cast<size_t>(n));
      sent += n;
      if (!writer->Write(chunk)) return grpc::Status::OK;
    } while (sent < size);
  }
  state_->store().Audit(by, "fetch", "run-" + std::to_string(request->run()), "");
  return grpc::Status::OK;
}

void OperatorService::Describe(const NodeRecord& node, pb::NodeInfo* info) {
  info->set_protocol_version(kProtocolVersion);
  info->set_id(node.id);
  info->set_state(node.state);
  info->set_connected(state_->Connected(node.id));
  info->set_last_seen(node.last_seen);
  info->set_version(node.version);
  info->set_build(node.build);
  if (const std::optional<NodeContact> contact = state_->LastContact(node.id)) {
    const auto ago = std::chrono::steady_clock::now() - contact->at;
    const std::time_t seen = std::time(nullptr) - std::chrono::duration_cast<std::chrono::seconds>(ago).count();
    info->set_last_seen(FormatUtc(seen));
    info->set_version(contact->version);
    info->set_build(contact->build);
    for (const int64_t run : contact->serving) info->add_serving(run);
  }
  info->set_cert_sha256(node.cert_sha256);
  info->set_cert_expires(node.cert_expires);
  info->set_runs_served(state_->store().RunsServed(node.id));
  info->set_enrolled_by(node.enrolled_by);
  info->set_enrolled_at(node.enrolled_at);
  info->set_revoked_by(node.revoked_by);
  info->set_revoked_at(node.revoked_at);
}

grpc::Status OperatorService::ListNodes(grpc::ServerContext* context, const pb::ListNodesRequest* request,
                                        pb::NodeList* reply) {
  std::string by;
  const grpc::Status refused = Operator(*context, request->protocol_version(), &by);
  if (!refused.ok()) return refused;
  *reply = AllNodes();
  if (!Admin(by)) {
    // The runs a node serves now: only the caller's are named to it.
    for (pb::NodeInfo& node : *reply->mutable_nodes()) {
      auto* serving = node.mutable_serving();
      const auto others = [&](int64_t run) {
        const std::optional<RunRecord> record = state_->store().Run(run);
        return !record || record->submitted_by != by;
      };
      serving->erase(std::remove_if(serving->begin(), serving->end(), others), serving->end());
    }
  }
  return grpc::Status::OK;
}

pb::NodeList OperatorService::AllNodes() {
  pb::NodeList list;
  list.set_protocol_version(kProtocolVersion);
  for (const NodeRecord& node : state_->store().Nodes()) Describe(node, list.add_nodes());
  return list;
}

grpc::Status OperatorService::Enrol(grpc::ServerContext* context, const pb::EnrolRequest* request,
                                    pb::NodeInfo* reply) {
  std::string by;
  const grpc::Status refused = AdminCall(*context, request->protocol_version(), "enrol a node", "enrol", &by);
  if (!refused.ok()) return refused;
  if (!state_->tls()) return Invalid("enrolment needs the federation's CA (--tls-dir), not --insecure");
  if (request->certificate().size() > 64 * 1024) return Invalid("a certificate over 64 KiB");
  const CertificateFacts facts = ReadCertificate(request->certificate(), state_->ca_pem());
  if (!facts.problem.empty()) return Invalid(facts.problem);
  if (facts.peer.id < 0) {
    return Invalid("not a node's certificate (client-<k>): " + facts.peer.problem);
  }
  const int id = facts.peer.id;
  const auto lock = state_->NodesLock();
  std::optional<NodeRecord> node = state_->store().Node(id);
  const std::string target = "client-" + std::to_string(id);
  std::string action = "enrol", detail = "certificate " + facts.peer.sha256.substr(0, 16);
  // Revocation is of a certificate, for good: its node comes back only
  // under a new one.
  if (const std::optional<RevokedCertificate> revoked = state_->store().Revoked(facts.peer.sha256)) {
    return Refused(by, target,
                   target + "'s certificate " + facts.peer.sha256.substr(0, 16) + " was revoked by " +
                       revoked->revoked_by + " at " + revoked->revoked_at +
                       ": a revoked certificate is never enrolled again; enrol a new one");
  }
  if (node && node->cert_sha256 == facts.peer.sha256 && node->state != "revoked") {
    Describe(*node, reply);  // enrolled with it already
    return grpc::Status::OK;
  }
  if (node && node->state == "revoked") {
    detail += ", a new certificate after the revocation by " + node->revoked_by;
  } else if (node) {
    action = "rekey";
    detail = "certificate " + node->cert_sha256.substr(0, 16) + " replaced by " + facts.peer.sha256.substr(0, 16);
  }
  NodeRecord record = node.value_or(NodeRecord{});
  record.id = id;
  record.state = "enrolled";
  record.cert_sha256 = facts.peer.sha256;
  record.cert_expires = facts.not_after;
  record.enrolled_by = by;
  record.enrolled_at = UtcNow();
  record.revoked_by.clear();
  record.revoked_at.clear();
  state_->store().PutNode(record);
  state_->store().Audit(by, action, target, detail);
  state_->WriteAccess();
  Describe(record, reply);
  return grpc::Status::OK;
}

grpc::Status OperatorService::Revoke(grpc::ServerContext* context, const pb::RevokeRequest* request,
                                     pb::NodeInfo* reply) {
  std::string by;
  const grpc::Status refused = AdminCall(*context, request->protocol_version(), "revoke a node",
                                         "client-" + std::to_string(request->node()), &by);
  if (!refused.ok()) return refused;
  std::optional<NodeRecord> node;
  bool revoked = false;
  {
    const auto lock = state_->NodesLock();
    node = state_->store().Node(request->node());
    if (!node) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no node " + std::to_string(request->node()) + " is enrolled");
    }
    if (node->state != "revoked") {
      node->state = "revoked";
      node->revoked_by = by;
      node->revoked_at = UtcNow();
      state_->store().PutNode(*node);
      state_->store().RevokeCertificate({node->cert_sha256, node->id, by, node->revoked_at});
      state_->store().Audit(by, "revoke", "client-" + std::to_string(node->id), Printable(request->reason(), 200));
      state_->WriteAccess();
      revoked = true;
    }
  }
  // Its parked sync is answered: its next one is refused.
  if (revoked) state_->Changed();
  Describe(*node, reply);
  return grpc::Status::OK;
}

grpc::Status OperatorService::Audit(grpc::ServerContext* context, const pb::AuditRequest* request,
                                    pb::AuditList* reply) {
  std::string by;
  const grpc::Status refused = AdminCall(*context, request->protocol_version(), "read the audit log", "audit", &by);
  if (!refused.ok()) return refused;
  reply->set_protocol_version(kProtocolVersion);
  for (const AuditRecord& r : state_->store().AuditAfter(request->after(), kMaxAuditEntries)) {
    pb::AuditEntry* e = reply->add_entries();
    e->set_seq(r.seq);
    e->set_at(r.at);
    e->set_actor(r.actor);
    e->set_action(r.action);
    e->set_target(r.target);
    e->set_detail(r.detail);
  }
  return grpc::Status::OK;
}

}  // namespace fedprof::federation
