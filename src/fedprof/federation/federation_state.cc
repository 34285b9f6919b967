#include "fedprof/federation/federation_state.h"

#include <utility>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/log.h"
#include "fedprof/deploy/server/access_list.h"

namespace fedprof::federation {

FederationState::FederationState(const FederationOptions& options, Store* store)
    : options_(options), store_(store) {
  if (tls()) {
    const std::string ca = options_.tls_dir + "/ca.crt";
    if (!FileExists(ca)) throw Error(ca + ": no such file (scripts/make-certs.sh writes it)");
    ca_pem_ = ReadFile(ca);
  }
  const auto lock = NodesLock();
  WriteAccess();
}

std::string FederationState::NodeRefusal(int id, const std::string& cert_sha256) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto node = nodes_.find(id);
  const std::string client = "client " + std::to_string(id);
  // Without TLS there are no certificates to enrol: every node is served.
  if (node == nodes_.end()) return tls() ? client + " is not enrolled in this federation" : "";
  if (node->second.state == "revoked") {
    return client + " is revoked (by " + node->second.revoked_by + " at " + node->second.revoked_at + ")";
  }
  if (tls() && node->second.cert_sha256 != cert_sha256) {
    return client + "'s certificate is not the one it is enrolled with (re-keyed: use its new key)";
  }
  return "";
}

void FederationState::WriteAccess() {
  deploy::AccessEntries entries;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    nodes_.clear();
    for (const NodeRecord& node : store_->Nodes()) {
      nodes_[node.id] = node;
      if (node.state == "revoked") {
        entries.revoked[node.id] = "by " + node.revoked_by + " at " + node.revoked_at;
      } else {
        entries.enrolled[node.id] = node.cert_sha256;
      }
    }
  }
  deploy::WriteAccessList(options_.state_dir + "/access.json", entries);
}

void FederationState::Contact(int id, NodeContact contact) {
  std::lock_guard<std::mutex> lock(mutex_);
  contacts_[id] = std::move(contact);
}

std::optional<NodeContact> FederationState::LastContact(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = contacts_.find(id);
  if (it == contacts_.end()) return std::nullopt;
  return it->second;
}

bool FederationState::Connected(int id) {
  const std::optional<NodeContact> contact = LastContact(id);
  return contact && std::chrono::duration<double>(std::chrono::steady_clock::now() - contact->at).count() <
                        kConnectedS;
}

std::pair<std::vector<pb::RunOffer>, uint64_t> FederationState::OffersFor(int id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<pb::RunOffer> offers;
  for (const OpenRun& run : open_) {
    if (id < run.clients) {
      offers.push_back(run.offer);
      offered_[id].insert(run.offer.run());
    }
  }
  return {offers, generation_};
}

bool FederationState::WasOffered(int id, int64_t run) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = offered_.find(id);
  return it != offered_.end() && it->second.count(run) != 0;
}

uint64_t FederationState::generation() {
  std::lock_guard<std::mutex> lock(mutex_);
  return generation_;
}

void FederationState::Changed() {
  std::unique_lock<std::mutex> snapshot(offers_mutex_);
  std::vector<OpenRun> open;
  for (const RunRecord& run : store_->ActiveRuns()) {
    // A run started before and queued or starting again is offered without
    // an address, so that the nodes serving it keep their clients on it.
    const bool resuming = (run.state == kRunQueued || run.state == kRunStarting) && !run.started_at.empty();
    if (!resuming && (run.state != kRunRunning || run.address.empty())) continue;
    OpenRun entry;
    entry.offer.set_run(run.id);
    entry.offer.set_resuming(resuming);
    if (!resuming) entry.offer.set_address(run.address);
    entry.offer.set_config(run.config);
    entry.offer.set_model_sha256(run.model_sha256);
    try {
      Config config;
      config.MergeTomlString(run.config, "run " + std::to_string(run.id));
      entry.clients = config.options().clients.count;
    } catch (const Error& e) {
      LogWarning("federation: run " + std::to_string(run.id) + ": " + e.what());
      continue;
    }
    open.push_back(std::move(entry));
  }
  std::vector<std::function<void()>> listeners;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = std::move(open);
    ++generation_;
    listeners = listeners_;
  }
  snapshot.unlock();
  for (const auto& listener : listeners) listener();
}

void FederationState::OnChange(std::function<void()> listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.push_back(std::move(listener));
}

}  // namespace fedprof::federation
