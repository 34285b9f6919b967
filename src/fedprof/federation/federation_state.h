#ifndef FEDPROF_FEDERATION_FEDERATION_STATE_H_
#define FEDPROF_FEDERATION_FEDERATION_STATE_H_

// What a federation's services share (federation.cc wires them): its
// options and store, which nodes may be served under which certificate,
// when each node was last heard from, and the runs open to nodes, with a
// generation that grows whenever they change. For the federation's parts
// only. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fedprof/federation/federation.h"
#include "fedprof/federation/store.h"
#include "operator.pb.h"

namespace fedprof::federation {

namespace pb = federation::v1;

struct NodeContact {
  std::chrono::steady_clock::time_point at;
  std::string version;
  std::string build;
  std::vector<int64_t> serving;  // runs open to it that it says it serves
  std::chrono::steady_clock::time_point stored_at;  // when its version last reached the store
};

class FederationState {
 public:
  FederationState(const FederationOptions& options, Store* store);

  const FederationOptions& options() const { return options_; }
  Store& store() { return *store_; }
  bool tls() const { return !options_.tls_dir.empty(); }
  const std::string& ca_pem() const { return ca_pem_; }

  // "" when client `id` presenting the certificate of fingerprint
  // `cert_sha256` is a node this federation serves; else why not.
  std::string NodeRefusal(int id, const std::string& cert_sha256);
  // Rewrites STATE/access.json, which every run's server reads, from the
  // store's nodes (after an enrolment or a revocation); NodesLock held.
  void WriteAccess();

  void Contact(int id, NodeContact contact);
  std::optional<NodeContact> LastContact(int id);
  // Heard from within the last kConnectedS.
  bool Connected(int id);

  // The runs open to node `id` now, and their generation.
  std::pair<std::vector<pb::RunOffer>, uint64_t> OffersFor(int id);
  // Whether run `run` was ever offered to node `id` since the federation
  // started: what a node may say it serves or refuses.
  bool WasOffered(int id, int64_t run);
  uint64_t generation();
  // The runs changed: recomputes the offers and calls each listener.
  void Changed();
  void OnChange(std::function<void()> listener);

  // Held by whoever reads a node's record, changes it and writes it back
  // (an enrolment, a revocation), through WriteAccess.
  std::unique_lock<std::mutex> NodesLock() { return std::unique_lock<std::mutex>(access_mutex_); }

 private:
  struct OpenRun {
    pb::RunOffer offer;
    int64_t clients = 0;  // its clients.count: node ids 0 .. clients − 1 serve it
  };

  const FederationOptions options_;
  Store* const store_;
  std::string ca_pem_;
  // Held from a read of the store to what is made of it, so that an older
  // snapshot never lands after a newer one: the offers (Changed), the
  // access list (WriteAccess), a node's read-modify-write (NodesLock).
  std::mutex offers_mutex_;
  std::mutex access_mutex_;
  std::mutex mutex_;
  std::map<int, NodeRecord> nodes_;  // the store's, kept here for every call's check
  std::map<int, NodeContact> contacts_;
  std::map<int, std::set<int64_t>> offered_;
  std::vector<OpenRun> open_;
  uint64_t generation_ = 1;
  std::vector<std::function<void()>> listeners_;
};

// A node counts as connected when heard from within this (a node syncs at
// least every 10 s).
inline constexpr double kConnectedS = 30;

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_FEDERATION_STATE_H_
