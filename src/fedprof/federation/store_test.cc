#include "fedprof/federation/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "fedprof/core/error.h"
#include "tests/expect_error.h"

namespace fedprof::federation {
namespace {

using testing_support::ExpectError;

std::string FreshStateDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/federation_store_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// What a federation wrote is there when it opens its state again: runs
// with every field, nodes, refusals, who served what, the audit log in order.
TEST(FederationStoreTest, EverythingWrittenIsThereWhenOpenedAgain) {
  const std::string dir = FreshStateDir("reopen");
  {
    Store store(dir);
    RunRecord run;
    run.name = "first";
    run.config = "rounds = 3\n";
    run.strategy = "fedavg";
    run.rounds = 3;
    run.submitted_by = "operator-alice";
    EXPECT_EQ(store.AddRun(run), 1);
    run.name = "second";
    EXPECT_EQ(store.AddRun(run), 2);
    RunRecord second = *store.Run(2);
    second.state = kRunRunning;
    second.address = "127.0.0.1:5000";
    store.UpdateRun(second);
    NodeRecord node;
    node.id = 7;
    node.cert_sha256 = std::string(64, 'a');
    store.PutNode(node);
    store.NodeSeen(7, "2026-12-01T00:00:00Z", "0.9.0", "commit x");
    store.AddRefusal({1, 7, "policy at_most \"rounds\" = 2: the run has 3", "2026-12-01T00:00:01Z"});
    store.AddServed(2, 7);
    store.AddServed(2, 7);  // once per pair
    store.Audit("operator-alice", "submit", "run-1", "first");
    store.Audit("federation", "start", "run-1", "");
  }
  Store store(dir);
  ASSERT_EQ(store.Runs().size(), 2u);
  const RunRecord second = *store.Run(2);
  EXPECT_EQ(second.name, "second");
  EXPECT_EQ(second.state, kRunRunning);
  EXPECT_EQ(second.address, "127.0.0.1:5000");
  EXPECT_EQ(second.config, "rounds = 3\n");
  EXPECT_EQ(second.submitted_by, "operator-alice");
  EXPECT_FALSE(store.Run(3).has_value());
  const NodeRecord node = *store.Node(7);
  EXPECT_EQ(node.cert_sha256, std::string(64, 'a'));
  EXPECT_EQ(node.version, "0.9.0");
  EXPECT_EQ(node.last_seen, "2026-12-01T00:00:00Z");
  ASSERT_EQ(store.Refusals(1).size(), 1u);
  EXPECT_EQ(store.Refusals(1)[0].node, 7);
  EXPECT_EQ(store.ServedBy(2), std::vector<int>{7});
  EXPECT_EQ(store.RunsServed(7), 1);
  const auto audit = store.AuditAfter(0);
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0].action, "submit");
  EXPECT_EQ(audit[1].actor, "federation");
  EXPECT_EQ(store.AuditAfter(audit[0].seq).size(), 1u);
}

// Text is stored as given, quotes and all (bound, never spliced into SQL).
TEST(FederationStoreTest, TextIsBoundNotSpliced) {
  Store store(FreshStateDir("text"));
  RunRecord run;
  run.name = "x'); DROP TABLE runs; --";
  store.AddRun(run);
  EXPECT_EQ(store.Runs().at(0).name, run.name);
}

// A database of a later schema is refused, not misread.
TEST(FederationStoreTest, ADatabaseOfANewerSchemaIsRefused) {
  const std::string dir = FreshStateDir("newer");
  { Store store(dir); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/federation.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  ExpectError([&] { Store store(dir); }, {"federation.db", "schema 99", "newer"});
}

// A node's runs served are counted through an index, not by reading the
// whole table for each node a listing shows (10,000 nodes after a run of
// all of them: 10^8 rows a listing); a state written without it gains it
// when opened.
TEST(FederationStoreTest, RunsServedAreCountedThroughAnIndex) {
  const std::string dir = FreshStateDir("served_index");
  {
    Store store(dir);
    for (int node = 0; node < 3; ++node) store.AddServed(1, node);
    store.AddServed(2, 1);
    EXPECT_EQ(store.RunsServed(1), 2);
    EXPECT_EQ(store.RunsServed(0), 1);
    EXPECT_EQ(store.RunsServed(7), 0);
  }
  auto plan = [&] {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir + "/federation.db").c_str(), &db), SQLITE_OK);
    std::string detail;
    sqlite3_exec(
        db, "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM served WHERE node=1",
        [](void* out, int columns, char** values, char**) {
          *static_cast<std::string*>(out) += values[columns - 1] ? values[columns - 1] : "";
          return 0;
        },
        &detail, nullptr);
    sqlite3_close(db);
    return detail;
  };
  EXPECT_NE(plan().find("USING COVERING INDEX served_by_node"), std::string::npos) << plan();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/federation.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP INDEX served_by_node", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(plan().find("served_by_node"), std::string::npos) << "dropped";
  { Store store(dir); }
  EXPECT_NE(plan().find("USING COVERING INDEX served_by_node"), std::string::npos) << plan();
}

// A revoked certificate is kept for good, the first revocation's word
// kept; a state of schema 1, which kept only the node's revocation, has its
// revoked nodes' certificates revoked when opened.
TEST(FederationStoreTest, RevokedCertificatesAreKeptForGood) {
  const std::string dir = FreshStateDir("revoked");
  const std::string first(64, 'a'), second(64, 'b'), old(64, 'c');
  {
    Store store(dir);
    store.RevokeCertificate({first, 3, "operator-alice", "2026-12-01T00:00:00Z"});
    store.RevokeCertificate({first, 3, "operator-bob", "2026-12-02T00:00:00Z"});
    NodeRecord node;
    node.id = 4;
    node.state = "revoked";
    node.cert_sha256 = old;
    node.revoked_by = "operator-alice";
    node.revoked_at = "2026-11-30T00:00:00Z";
    store.PutNode(node);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/federation.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM revoked_certificates WHERE sha256 LIKE 'c%'; PRAGMA user_version=1",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Store store(dir);
  const std::optional<RevokedCertificate> revoked = store.Revoked(first);
  ASSERT_TRUE(revoked.has_value());
  EXPECT_EQ(revoked->node, 3);
  EXPECT_EQ(revoked->revoked_by, "operator-alice");
  EXPECT_FALSE(store.Revoked(second).has_value());
  const std::optional<RevokedCertificate> migrated = store.Revoked(old);
  ASSERT_TRUE(migrated.has_value()) << "schema 1's revoked node";
  EXPECT_EQ(migrated->node, 4);
  EXPECT_EQ(migrated->revoked_at, "2026-11-30T00:00:00Z");
}

}  // namespace
}  // namespace fedprof::federation
