#ifndef FEDPROF_FEDERATION_STORE_H_
#define FEDPROF_FEDERATION_STORE_H_

// What a federation remembers across restarts (fedprof federation serve
// --state DIR): its runs, its nodes, the certificates it revoked, the
// rules by which nodes refused runs, which nodes served which run, and the
// audit log of who did what. One
// SQLite database, DIR/federation.db, in WAL mode with every change
// committed to disk before the call returns, so that a SIGKILL loses
// nothing that was answered. Thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fedprof::federation {

// The states of a run, in the order it may pass them.
inline constexpr const char* kRunQueued = "queued";
inline constexpr const char* kRunStarting = "starting";
inline constexpr const char* kRunRunning = "running";
inline constexpr const char* kRunStopping = "stopping";
inline constexpr const char* kRunFinished = "finished";
inline constexpr const char* kRunStopped = "stopped";
inline constexpr const char* kRunFailed = "failed";

// Whether a run in `state` is over (finished, stopped or failed).
bool Ended(const std::string& state);

struct RunRecord {
  int64_t id = 0;
  std::string name;
  std::string state = kRunQueued;
  std::string detail;  // why it failed or stopped, or what it waits for
  std::string submitted_by;
  std::string submitted_at;
  std::string started_at;
  std::string finished_at;
  std::string config;  // the whole config, TOML
  std::string model_sha256;
  std::string strategy;
  int64_t rounds = 0;
  std::string address;  // its server's HOST:PORT, once it listens
  std::string stop_requested_by;
};

struct NodeRecord {
  int id = -1;
  std::string state = "enrolled";  // or "revoked"
  std::string cert_sha256;
  std::string cert_expires;
  std::string enrolled_by;
  std::string enrolled_at;
  std::string revoked_by;
  std::string revoked_at;
  std::string last_seen;
  std::string version;
  std::string build;
};

struct RevokedCertificate {
  std::string sha256;  // of the certificate's DER
  int node = -1;
  std::string revoked_by;
  std::string revoked_at;
};

struct RefusalRecord {
  int64_t run = 0;
  int node = -1;
  std::string rule;
  std::string at;
};

struct AuditRecord {
  int64_t seq = 0;
  std::string at;
  std::string actor;
  std::string action;
  std::string target;
  std::string detail;
};

// The time now as ISO 8601 in UTC, to the second: 2026-12-01T20:40:00Z.
std::string UtcNow();

class Store {
 public:
  // Opens DIR/federation.db, creating it (and DIR) if missing. Throws
  // fedprof::Error naming the file when it cannot, or when it is of a
  // newer schema than this build knows.
  explicit Store(const std::string& dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // A new run; its id is returned (1, 2, ...).
  int64_t AddRun(const RunRecord& run);
  void UpdateRun(const RunRecord& run);
  std::optional<RunRecord> Run(int64_t id);
  std::vector<RunRecord> Runs();
  // The runs not over yet (queued, starting, running, stopping), by id.
  std::vector<RunRecord> ActiveRuns();

  // Adds or replaces node `node.id`.
  void PutNode(const NodeRecord& node);
  // Its last contact (and what it runs) only.
  void NodeSeen(int id, const std::string& at, const std::string& version, const std::string& build);
  std::optional<NodeRecord> Node(int id);
  std::vector<NodeRecord> Nodes();

  // A certificate revoked for good (once: a second call keeps the first).
  void RevokeCertificate(const RevokedCertificate& certificate);
  std::optional<RevokedCertificate> Revoked(const std::string& sha256);

  void AddRefusal(const RefusalRecord& refusal);
  std::vector<RefusalRecord> Refusals(int64_t run);
  // That node `node` serves run `run` (once per pair).
  void AddServed(int64_t run, int node);
  std::vector<int> ServedBy(int64_t run);
  int64_t RunsServed(int node);

  void Audit(const std::string& actor, const std::string& action, const std::string& target,
             const std::string& detail);
  // The entries after `seq`, at most `limit` of them.
  std::vector<AuditRecord> AuditAfter(int64_t seq, size_t limit = 1000);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_STORE_H_
