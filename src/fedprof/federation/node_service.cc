#include "fedprof/federation/node_service.h"

#include <algorithm>

#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::federation {
namespace {

// What a sync may weigh: a few numbers, two short strings, and the runs it
// serves and refused, each refusal a line of at most 1000 bytes.
constexpr size_t kMaxSyncBytes = 64 * 1024;
constexpr int kMaxListed = 64;
constexpr size_t kMaxTextBytes = 200;
constexpr size_t kMaxRuleBytes = 1000;
// The longest a sync is held open, and the most held at once (one a node).
constexpr double kMaxWaitS = 30;
constexpr size_t kMaxParked = 100000;

}  // namespace

NodeService::NodeService(FederationState* state) : state_(state) {
  state_->OnChange([this] { AnswerAll(/*expired_only=*/false); });
  waker_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(250));
      lock.unlock();
      AnswerAll(/*expired_only=*/true);
      lock.lock();
    }
  });
}

NodeService::~NodeService() {
  Stop();
  waker_.join();
}

void NodeService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  AnswerAll(/*expired_only=*/false);
}

grpc::Status NodeService::Admit(const grpc::CallbackServerContext& context, const pb::NodeSyncRequest& request) {
  const std::string mismatch = ProtocolMismatch(request.protocol_version(), "the node");
  if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
  const size_t size = request.ByteSizeLong();
  if (size > kMaxSyncBytes) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "a node's sync of " + std::to_string(size) + " bytes, over its limit of " +
                            std::to_string(kMaxSyncBytes));
  }
  if (request.serving_size() > kMaxListed || request.refusals_size() > kMaxListed) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a sync listing more than 64 runs");
  }
  if (!(request.wait_s() >= 0 && request.wait_s() <= 3600)) {  // NaN fails too
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "wait_s " + FormatDouble(request.wait_s()) + " is not in [0, 3600]");
  }
  std::string sha;
  if (state_->tls()) {
    const CertifiedPeer peer = CertifiedClient(context);
    if (peer.id < 0) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "only a node's certificate (client-<k>) may make a node's calls" +
                              (peer.problem.empty() ? "" : ": this is " + peer.problem));
    }
    if (peer.id != request.client_id()) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "certificate of client " + std::to_string(peer.id) + " used to speak as client " +
                              std::to_string(request.client_id()));
    }
    sha = peer.sha256;
  }
  if (request.client_id() < 0) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a negative client id");
  const std::string refused = state_->NodeRefusal(request.client_id(), sha);
  if (!refused.empty()) return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, refused);
  return grpc::Status::OK;
}

void NodeService::Record(const pb::NodeSyncRequest& request) {
  const int id = request.client_id();
  NodeContact contact;
  contact.at = std::chrono::steady_clock::now();
  contact.version = Printable(request.version(), kMaxTextBytes);
  contact.build = Printable(request.build(), kMaxTextBytes);
  const std::optional<NodeContact> before = state_->LastContact(id);
  contact.stored_at = before ? before->stored_at : std::chrono::steady_clock::time_point{};
  // A node speaks only of the runs offered to it: what it says of any
  // other is not taken.
  const auto offered = [&](int64_t run) { return state_->WasOffered(id, run); };
  for (const int64_t run : request.serving()) {
    if (offered(run)) contact.serving.push_back(run);
  }
  Store& store = state_->store();
  // Its version and build reach the store on its first sync since the
  // federation started and, when they change, at most once a minute; its
  // every contact stays in memory.
  const bool changed = !before || before->version != contact.version || before->build != contact.build;
  if (changed && (!before || contact.at - contact.stored_at > std::chrono::minutes(1))) {
    store.NodeSeen(id, UtcNow(), contact.version, contact.build);
    contact.stored_at = contact.at;
  } else if (changed) {
    contact.version = before->version;
    contact.build = before->build;
  }
  for (const int64_t run : contact.serving) {
    const bool already =
        before && std::find(before->serving.begin(), before->serving.end(), run) != before->serving.end();
    if (!already) store.AddServed(run, id);
  }
  for (const pb::NodeRefusal& refusal : request.refusals()) {
    if (!offered(refusal.run())) continue;
    const std::string rule = Printable(refusal.rule(), kMaxRuleBytes);
    bool seen = false;
    for (const RefusalRecord& r : store.Refusals(refusal.run())) seen = seen || r.node == id;
    if (seen) continue;
    store.AddRefusal({refusal.run(), id, rule, UtcNow()});
    store.Audit("client-" + std::to_string(id), "refuse", "run-" + std::to_string(refusal.run()), rule);
  }
  state_->Contact(id, std::move(contact));
}

void NodeService::Answer(const Parked& parked) {
  auto [offers, generation] = state_->OffersFor(parked.id);
  parked.reply->set_protocol_version(kProtocolVersion);
  parked.reply->set_generation(generation);
  for (pb::RunOffer& offer : offers) *parked.reply->add_runs() = std::move(offer);
  parked.call->Finish(grpc::Status::OK);
}

void NodeService::AnswerAll(bool expired_only) {
  std::vector<Parked> due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    auto keep = std::partition(parked_.begin(), parked_.end(),
                               [&](const Parked& p) { return expired_only && p.deadline > now; });
    due.assign(keep, parked_.end());
    parked_.erase(keep, parked_.end());
  }
  for (const Parked& p : due) Answer(p);
}

grpc::ServerUnaryReactor* NodeService::Sync(grpc::CallbackServerContext* context, const pb::NodeSyncRequest* request,
                                            pb::NodeSyncReply* reply) {
  grpc::ServerUnaryReactor* call = context->DefaultReactor();
  const grpc::Status refused = Admit(*context, *request);
  if (!refused.ok()) {
    call->Finish(refused);
    return call;
  }
  try {
    Record(*request);
  } catch (const std::exception& e) {
    call->Finish(grpc::Status(grpc::StatusCode::INTERNAL, std::string("the federation: ") + e.what()));
    return call;
  }
  Parked parked{call, reply, request->client_id(), std::chrono::steady_clock::now()};
  const double wait_s = std::min(request->wait_s(), kMaxWaitS);
  std::vector<Parked> earlier;
  {
    // Under the lock a change's AnswerAll takes: a change after this check
    // answers the call, one before it is seen by it.
    std::lock_guard<std::mutex> lock(mutex_);
    if (wait_s > 0 && !stopping_ && request->generation() == state_->generation() &&
        parked_.size() < kMaxParked) {
      // One parked sync per node: an earlier one is answered now.
      auto mine = std::partition(parked_.begin(), parked_.end(),
                                 [&](const Parked& p) { return p.id != parked.id; });
      earlier.assign(mine, parked_.end());
      parked_.erase(mine, parked_.end());
      parked.deadline += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(wait_s));
      parked_.push_back(parked);
    } else {
      earlier.push_back(parked);
    }
  }
  for (const Parked& p : earlier) Answer(p);
  return call;
}

}  // namespace fedprof::federation
