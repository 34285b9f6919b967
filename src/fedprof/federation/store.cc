#include "fedprof/federation/store.h"

#include <sqlite3.h>

#include <ctime>
#include <mutex>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof::federation {
namespace {

// The schema this build writes (PRAGMA user_version); a database of a later
// one is refused rather than misread.
constexpr int kSchemaVersion = 2;  // 2: revoked_certificates

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL, state TEXT NOT NULL, detail TEXT NOT NULL,
  submitted_by TEXT NOT NULL, submitted_at TEXT NOT NULL, started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL, config TEXT NOT NULL, model_sha256 TEXT NOT NULL,
  strategy TEXT NOT NULL, rounds INTEGER NOT NULL, address TEXT NOT NULL,
  stop_requested_by TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
  id INTEGER PRIMARY KEY,
  state TEXT NOT NULL, cert_sha256 TEXT NOT NULL, cert_expires TEXT NOT NULL,
  enrolled_by TEXT NOT NULL, enrolled_at TEXT NOT NULL, revoked_by TEXT NOT NULL,
  revoked_at TEXT NOT NULL, last_seen TEXT NOT NULL, version TEXT NOT NULL, build TEXT NOT NULL);
-- Every certificate revoked, for good: re-admitting its node takes a new one.
CREATE TABLE IF NOT EXISTS revoked_certificates (
  sha256 TEXT PRIMARY KEY, node INTEGER NOT NULL, revoked_by TEXT NOT NULL, revoked_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS refusals (
  run INTEGER NOT NULL, node INTEGER NOT NULL, rule TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS served (
  run INTEGER NOT NULL, node INTEGER NOT NULL, PRIMARY KEY (run, node));
-- A node's runs served, asked for every node listed: without it each asking
-- reads the whole table (a listing of 10,000 nodes after a run of them all,
-- 10^8 rows).
CREATE INDEX IF NOT EXISTS served_by_node ON served (node);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
  detail TEXT NOT NULL);
)";

}  // namespace

bool Ended(const std::string& state) { return state == kRunFinished || state == kRunStopped || state == kRunFailed; }

std::string UtcNow() { return FormatUtc(std::time(nullptr)); }

class Store::Impl {
 public:
  explicit Impl(const std::string& dir) : path_(dir + "/federation.db") {
    MakeDirs(dir);
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw Error(path_ + ": cannot open the federation's database (" + why + ")");
    }
    sqlite3_busy_timeout(db_, 5000);
    // WAL: readers do not wait for the writer; FULL: a change is on disk
    // before the call that made it returns.
    Exec("PRAGMA journal_mode=WAL");
    Exec("PRAGMA synchronous=FULL");
    const int version = Integer("PRAGMA user_version");
    if (version > kSchemaVersion) {
      throw Error(path_ + ": a database of schema " + std::to_string(version) + ", newer than this fedprof's " +
                  std::to_string(kSchemaVersion) + "; run the newer fedprof");
    }
    Exec(kSchema);
    if (version == 1) {
      // Schema 1 kept a node's revocation only: its certificate then is revoked.
      Exec("INSERT OR IGNORE INTO revoked_certificates SELECT cert_sha256, id, revoked_by, revoked_at FROM nodes "
           "WHERE state='revoked'");
    }
    Exec("PRAGMA user_version=" + std::to_string(kSchemaVersion));
  }

  ~Impl() { sqlite3_close(db_); }

  // One statement with its text parameters bound in order; `row` is called
  // on each row of the result.
  template <typename Row>
  void Query(const std::string& sql, const std::vector<std::string>& params, Row row) {
    std::lock_guard<std::mutex> lock(mutex_);
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) Fail("prepare");
    for (size_t i = 0; i < params.size(); ++i) {
      sqlite3_bind_text(statement, static_cast<int>(i + 1), params[i].c_str(), static_cast<int>(params[i].size()),
                        SQLITE_TRANSIENT);
    }
    int rc = SQLITE_ROW;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) row(statement);
    sqlite3_finalize(statement);
    if (rc != SQLITE_DONE) Fail("step");
  }

  void Exec(const std::string& sql, const std::vector<std::string>& params = {}) {
    if (params.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      char* message = nullptr;
      if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        const std::string why = message ? message : "error";
        sqlite3_free(message);
        throw Error(path_ + ": " + why);
      }
      return;
    }
    Query(sql, params, [](sqlite3_stmt*) {});
  }

  int64_t Integer(const std::string& sql, const std::vector<std::string>& params = {}) {
    int64_t value = 0;
    Query(sql, params, [&](sqlite3_stmt* s) { value = sqlite3_column_int64(s, 0); });
    return value;
  }

 private:
  [[noreturn]] void Fail(const char* what) {
    throw Error(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
  }

  const std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
};

namespace {

std::string Text(sqlite3_stmt* s, int column) {
  const unsigned char* text = sqlite3_column_text(s, column);
  return text ? reinterpret_cast<const char*>(text) : "";
}

const char* const kRunColumns =
    "id, name, state, detail, submitted_by, submitted_at, started_at, finished_at, config, model_sha256, "
    "strategy, rounds, address, stop_requested_by";

RunRecord RunOf(sqlite3_stmt* s) {
  RunRecord r;
  r.id = sqlite3_column_int64(s, 0);
  r.name = Text(s, 1);
  r.state = Text(s, 2);
  r.detail = Text(s, 3);
  r.submitted_by = Text(s, 4);
  r.submitted_at = Text(s, 5);
  r.started_at = Text(s, 6);
  r.finished_at = Text(s, 7);
  r.config = Text(s, 8);
  r.model_sha256 = Text(s, 9);
  r.strategy = Text(s, 10);
  r.rounds = sqlite3_column_int64(s, 11);
  r.address = Text(s, 12);
  r.stop_requested_by = Text(s, 13);
  return r;
}

std::vector<std::string> RunValues(const RunRecord& r) {
  return {r.name,         r.state,        r.detail,   r.submitted_by, r.submitted_at,
          r.started_at,   r.finished_at,  r.config,   r.model_sha256, r.strategy,
          std::to_string(r.rounds), r.address, r.stop_requested_by};
}

const char* const kNodeColumns =
    "id, state, cert_sha256, cert_expires, enrolled_by, enrolled_at, revoked_by, revoked_at, last_seen, "
    "version, build";

NodeRecord NodeOf(sqlite3_stmt* s) {
  NodeRecord n;
  n.id = static_cast<int>(sqlite3_column_int64(s, 0));
  n.state = Text(s, 1);
  n.cert_sha256 = Text(s, 2);
  n.cert_expires = Text(s, 3);
  n.enrolled_by = Text(s, 4);
  n.enrolled_at = Text(s, 5);
  n.revoked_by = Text(s, 6);
  n.revoked_at = Text(s, 7);
  n.last_seen = Text(s, 8);
  n.version = Text(s, 9);
  n.build = Text(s, 10);
  return n;
}

}  // namespace

Store::Store(const std::string& dir) : impl_(std::make_unique<Impl>(dir)) {}
Store::~Store() = default;

int64_t Store::AddRun(const RunRecord& run) {
  return impl_->Integer(
      "INSERT INTO runs (name, state, detail, submitted_by, submitted_at, started_at, finished_at, config, "
      "model_sha256, strategy, rounds, address, stop_requested_by) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
      RunValues(run));
}

void Store::UpdateRun(const RunRecord& run) {
  std::vector<std::string> values = RunValues(run);
  values.push_back(std::to_string(run.id));
  impl_->Exec(
      "UPDATE runs SET name=?, state=?, detail=?, submitted_by=?, submitted_at=?, started_at=?, finished_at=?, "
      "config=?, model_sha256=?, strategy=?, rounds=?, address=?, stop_requested_by=? WHERE id=?",
      values);
}

std::optional<RunRecord> Store::Run(int64_t id) {
  std::optional<RunRecord> found;
  impl_->Query(std::string("SELECT ") + kRunColumns + " FROM runs WHERE id=?", {std::to_string(id)},
               [&](sqlite3_stmt* s) { found = RunOf(s); });
  return found;
}

std::vector<RunRecord> Store::Runs() {
  std::vector<RunRecord> runs;
  impl_->Query(std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id", {},
               [&](sqlite3_stmt* s) { runs.push_back(RunOf(s)); });
  return runs;
}

std::vector<RunRecord> Store::ActiveRuns() {
  std::vector<RunRecord> runs;
  impl_->Query(std::string("SELECT ") + kRunColumns +
                   " FROM runs WHERE state NOT IN ('finished', 'stopped', 'failed') ORDER BY id",
               {}, [&](sqlite3_stmt* s) { runs.push_back(RunOf(s)); });
  return runs;
}

void Store::PutNode(const NodeRecord& n) {
  impl_->Exec(std::string("INSERT OR REPLACE INTO nodes (") + kNodeColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?)",
              {std::to_string(n.id), n.state, n.cert_sha256, n.cert_expires, n.enrolled_by, n.enrolled_at,
               n.revoked_by, n.revoked_at, n.last_seen, n.version, n.build});
}

void Store::NodeSeen(int id, const std::string& at, const std::string& version, const std::string& build) {
  impl_->Exec("UPDATE nodes SET last_seen=?, version=?, build=? WHERE id=?", {at, version, build, std::to_string(id)});
}

std::optional<NodeRecord> Store::Node(int id) {
  std::optional<NodeRecord> found;
  impl_->Query(std::string("SELECT ") + kNodeColumns + " FROM nodes WHERE id=?", {std::to_string(id)},
               [&](sqlite3_stmt* s) { found = NodeOf(s); });
  return found;
}

std::vector<NodeRecord> Store::Nodes() {
  std::vector<NodeRecord> nodes;
  impl_->Query(std::string("SELECT ") + kNodeColumns + " FROM nodes ORDER BY id", {},
               [&](sqlite3_stmt* s) { nodes.push_back(NodeOf(s)); });
  return nodes;
}

void Store::RevokeCertificate(const RevokedCertificate& c) {
  impl_->Exec("INSERT OR IGNORE INTO revoked_certificates (sha256, node, revoked_by, revoked_at) VALUES (?,?,?,?)",
              {c.sha256, std::to_string(c.node), c.revoked_by, c.revoked_at});
}

std::optional<RevokedCertificate> Store::Revoked(const std::string& sha256) {
  std::optional<RevokedCertificate> found;
  impl_->Query("SELECT sha256, node, revoked_by, revoked_at FROM revoked_certificates WHERE sha256=?", {sha256},
               [&](sqlite3_stmt* s) {
                 found = RevokedCertificate{Text(s, 0), static_cast<int>(sqlite3_column_int64(s, 1)), Text(s, 2),
                                            Text(s, 3)};
               });
  return found;
}

void Store::AddRefusal(const RefusalRecord& r) {
  impl_->Exec("INSERT INTO refusals (run, node, rule, at) VALUES (?,?,?,?)",
              {std::to_string(r.run), std::to_string(r.node), r.rule, r.at});
}

std::vector<RefusalRecord> Store::Refusals(int64_t run) {
  std::vector<RefusalRecord> out;
  impl_->Query("SELECT run, node, rule, at FROM refusals WHERE run=? ORDER BY rowid", {std::to_string(run)},
               [&](sqlite3_stmt* s) {
                 out.push_back({sqlite3_column_int64(s, 0), static_cast<int>(sqlite3_column_int64(s, 1)),
                                Text(s, 2), Text(s, 3)});
               });
  return out;
}

void Store::AddServed(int64_t run, int node) {
  impl_->Exec("INSERT OR IGNORE INTO served (run, node) VALUES (?,?)", {std::to_string(run), std::to_string(node)});
}

std::vector<int> Store::ServedBy(int64_t run) {
  std::vector<int> nodes;
  impl_->Query("SELECT node FROM served WHERE run=? ORDER BY node", {std::to_string(run)},
               [&](sqlite3_stmt* s) { nodes.push_back(static_cast<int>(sqlite3_column_int64(s, 0))); });
  return nodes;
}

int64_t Store::RunsServed(int node) {
  return impl_->Integer("SELECT COUNT(*) FROM served WHERE node=?", {std::to_string(node)});
}

void Store::Audit(const std::string& actor, const std::string& action, const std::string& target,
                  const std::string& detail) {
  impl_->Exec("INSERT INTO audit (at, actor, action, target, detail) VALUES (?,?,?,?,?)",
              {UtcNow(), actor, action, target, detail});
}

std::vector<AuditRecord> Store::AuditAfter(int64_t seq, size_t limit) {
  std::vector<AuditRecord> out;
  impl_->Query("SELECT seq, at, actor, action, target, detail FROM audit WHERE seq>? ORDER BY seq LIMIT ?",
               {std::to_string(seq), std::to_string(limit)}, [&](sqlite3_stmt* s) {
                 out.push_back({sqlite3_column_int64(s, 0), Text(s, 1), Text(s, 2), Text(s, 3), Text(s, 4),
                                Text(s, 5)});
               });
  return out;
}

}  // namespace fedprof::federation
