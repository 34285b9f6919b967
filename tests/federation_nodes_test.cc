// A federation's nodes: revoked mid-run (refused at their next call, the run
// going on under its quorum), re-keyed (the new key serves, the old one is
// refused), refusing a run by their own policy, and the roles certificates
// give (a node's or a relay's key makes no operator's call; an operator
// reads and stops only its own runs, an admin every one); a run's config
// untrusted by the federation and its nodes.

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "tests/csv_columns.h"
#include "tests/federation.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::Federation;
using testing_support::kCli;
using testing_support::MakeCerts;
using testing_support::SmallRun;
using testing_support::WaitUntil;

void EnrolAll(Federation& f, int n) { ASSERT_EQ(f.Enrol(n).size(), static_cast<size_t>(n)); }

// Node 2 revoked while a run needs 2 of its 3 clients a round: its next
// call is refused, in its run and at the federation (it stops, saying
// why), and the run finishes with the other two; the audit log names who
// revoked it. Its revoked certificate cannot be enrolled again. Re-keyed (a
// new key, its certificate signed by the CA and enrolled), it serves the
// next run; its old key is refused.
TEST(FederationTest, ARevokedNodeIsRefusedAndARekeyedOneServesUnderItsNewKeyOnly) {
  Federation f;
  f.dir = testing_support::FreshDir("federation", "revoke");
  f.certs = MakeCerts(f.dir, 3, "certs", 0, "alice");
  f.Start();
  EnrolAll(f, 3);
  for (int k = 0; k < 3; ++k) f.StartNode(std::to_string(k));
  const std::string run = SmallRun(3, 1.0, 30) + testing_support::kFastFaults +
                          " --set strategy.name=fedavg --set deploy.min_results=2";
  ASSERT_FALSE(f.Operator("submit " + run).is_null());
  const nlohmann::json reached = f.WaitFor(1, 120, 2);
  ASSERT_FALSE(reached.is_null()) << f.procs.Output(f.server);
  ASSERT_GE(reached.at("rounds_done").get<int>(), 2) << reached;
  const nlohmann::json revoked = f.Operator("revoke 2 --reason 'its key leaked'");
  ASSERT_FALSE(revoked.is_null());
  EXPECT_EQ(revoked.at("state"), "revoked");
  EXPECT_EQ(revoked.at("revoked_by"), "operator-alice");
  // The node hears it at its next sync and stops, saying why.
  EXPECT_EQ(f.procs.Wait(f.nodes[2], 60), 1);
  const std::string node_log = f.procs.Output(f.nodes[2]);
  EXPECT_NE(node_log.find("client 2 is revoked (by operator-alice"), std::string::npos) << node_log;
  // Its key is refused by the run's server too (the federation's access
  // list), should it come there as a client of the run's: one line.
  const nlohmann::json running = f.Operator("status 1");
  ASSERT_EQ(running.at("state"), "running") << running;
  const int direct = f.procs.Start(kCli,
                                   "client --server " + running.at("address").get<std::string>() +
                                       " --id 2 --give-up-after 5 --tls-dir " + f.certs + " " + run,
                                   f.dir + "/direct.log");
  EXPECT_EQ(f.procs.Wait(direct, 60), 1);
  EXPECT_NE(f.procs.Output(direct).find("client 2 is revoked (by operator-alice"), std::string::npos)
      << f.procs.Output(direct);
  const nlohmann::json done = f.WaitFor(1, 180);
  ASSERT_EQ(done.at("state"), "finished") << done;
  const auto metrics = testing_support::Columns(f.dir + "/state/runs/1/out/metrics.csv");
  EXPECT_EQ(metrics.at("returned").back(), "2") << "the run went on with nodes 0 and 1";
  EXPECT_EQ(metrics.at("selected").back(), "2");
  bool named = false;
  for (const auto& entry : f.Operator("audit")) {
    named = named || (entry.at("action") == "revoke" && entry.at("actor") == "operator-alice" &&
                      entry.at("target") == "client-2" && entry.at("detail") == "its key leaked");
  }
  EXPECT_TRUE(named);
  // Revocation is of the certificate: the one revoked is never enrolled again.
  int code = 0;
  std::string said;
  EXPECT_TRUE(f.Operator("enrol " + f.certs + "/client-2.crt", &code, &said).is_null());
  EXPECT_EQ(code, 1);
  EXPECT_NE(said.find("client-2's certificate"), std::string::npos) << said;
  EXPECT_NE(said.find("was revoked by operator-alice"), std::string::npos) << said;
  EXPECT_EQ(f.Operator("nodes").at(2).at("state"), "revoked");

  // Re-keying: a new TLS key made by the node, signed by the CA, enrolled.
  const std::string old_keys = f.dir + "/old-keys", new_keys = f.dir + "/new-keys";
  std::filesystem::copy(f.certs, old_keys);
  ASSERT_EQ(testing_support::RunCli("keygen --id 2 --out " + new_keys).code, 0);
  ASSERT_EQ(std::system(("bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh --sign " + f.certs + " " + new_keys +
                         "/client-2.csr > /dev/null 2>&1")
                            .c_str()),
            0);
  for (const char* file : {"client-2.crt", "ca.crt", "secagg-roster"}) {
    std::filesystem::copy_file(f.certs + "/" + file, new_keys + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  const nlohmann::json rekeyed = f.Operator("enrol " + new_keys + "/client-2.crt");
  ASSERT_EQ(rekeyed.size(), 1u);
  EXPECT_EQ(rekeyed[0].at("state"), "enrolled");
  const int old_node = f.StartNode("2", "", old_keys);
  EXPECT_EQ(f.procs.Wait(old_node, 60), 1);
  EXPECT_NE(f.procs.Output(old_node).find("certificate is not the one it is enrolled with"), std::string::npos)
      << f.procs.Output(old_node);
  const int new_node = f.StartNode("2", "", new_keys);
  ASSERT_FALSE(f.Operator("submit " + SmallRun(3, 1.0, 2) + " --set strategy.name=fedavg").is_null());
  const nlohmann::json second = f.WaitFor(2, 120);
  ASSERT_EQ(second.at("state"), "finished") << second;
  EXPECT_EQ(second.at("nodes"), nlohmann::json::array({0, 1, 2}));
  EXPECT_TRUE(f.procs.Running(new_node));
  bool rekey = false, refused = false;
  for (const auto& entry : f.Operator("audit")) {
    rekey = rekey || (entry.at("action") == "enrol" && entry.at("actor") == "operator-alice" &&
                      entry.at("detail").get<std::string>().find("a new certificate after the revocation") !=
                          std::string::npos);
    refused = refused || (entry.at("action") == "refused" && entry.at("target") == "client-2");
  }
  EXPECT_TRUE(rekey);
  EXPECT_TRUE(refused) << "the enrolment of the revoked certificate";
}

// Node 0's policy asks for secure aggregation: a run without it is refused
// there with the rule named, in the node's log and in the run's status,
// while nodes 1 and 2 serve it; the next run, under SecAgg, node 0 serves.
// Node 2's allows two training rounds a day: the first run's third is
// refused, and on another day it serves the next.
TEST(FederationTest, ANodesPolicyRefusesARunWithoutSecureAggregationAndServesTheNext) {
  Federation f;
  f.dir = testing_support::FreshDir("federation", "policy");
  f.certs = MakeCerts(f.dir, 3, "certs", 0, "alice");
  const std::string policy = f.dir + "/policy.toml";
  WriteFileAtomic(policy, "[allow]\n\"secagg.protocol\" = [\"secagg\", \"secagg+\"]\n");
  const std::string daily = f.dir + "/daily.toml";
  WriteFileAtomic(daily, "[limits]\nrounds_per_day = 2\n");
  f.Start();
  EnrolAll(f, 3);
  f.StartNode("0", "--policy " + policy);
  f.StartNode("1");
  f.StartNode("2", "--policy " + daily);
  ASSERT_FALSE(f.Operator("submit " + SmallRun(3, 1.0, 3) + " --set deploy.min_clients=2").is_null());
  const nlohmann::json plain = f.WaitFor(1, 120);
  ASSERT_EQ(plain.at("state"), "finished") << plain;
  EXPECT_EQ(plain.at("rounds_done"), 3);
  // Node 2 trains two rounds of the day and refuses the third's task, named
  // in its log and in the run's; the run goes on with node 1.
  const std::string spent = "policy limits rounds_per_day = 2: client 2 has trained 2 rounds on ";
  EXPECT_NE(f.procs.Output(f.nodes[2]).find("run 1: " + spent), std::string::npos) << f.procs.Output(f.nodes[2]);
  EXPECT_NE(ReadFile(f.dir + "/state/runs/1/log.txt").find(spent), std::string::npos)
      << ReadFile(f.dir + "/state/runs/1/log.txt");
  const auto rounds = testing_support::Columns(f.dir + "/state/runs/1/out/metrics.csv");
  EXPECT_EQ(rounds.at("returned"), (std::vector<std::string>{"2", "2", "1"}));
  ASSERT_EQ(plain.at("refusals").size(), 1u) << plain;
  EXPECT_EQ(plain.at("refusals")[0].at("node"), 0);
  const std::string rule = "policy allow \"secagg.protocol\" = [secagg, secagg+]: the run has none";
  EXPECT_EQ(plain.at("refusals")[0].at("rule"), rule);
  EXPECT_NE(f.procs.Output(f.nodes[0]).find("refused run 1: " + rule), std::string::npos)
      << f.procs.Output(f.nodes[0]);
  EXPECT_EQ(plain.at("nodes"), nlohmann::json::array({1, 2}));

  // Another day (its count file says so): node 2 trains again.
  const std::string count = f.certs + "/client-2.rounds";
  const std::string today = ReadFile(count).substr(0, 10);
  WriteFileAtomic(count, "2000-01-01 2\n");
  ASSERT_FALSE(
      f.Operator("submit " + SmallRun(3, 1.0, 2) + " --set secagg.protocol=secagg --set secagg.min_clients=3")
          .is_null());
  const nlohmann::json secure = f.WaitFor(2, 180);
  ASSERT_EQ(secure.at("state"), "finished") << secure << ReadFile(f.dir + "/state/runs/2/log.txt");
  EXPECT_TRUE(secure.at("refusals").empty()) << secure;
  EXPECT_EQ(secure.at("nodes"), nlohmann::json::array({0, 1, 2}));
  EXPECT_EQ(ReadFile(count), today + " 2\n");
  for (int node : f.nodes) EXPECT_TRUE(f.procs.Running(node));
}

// Only an operator's certificate makes an operator's calls: a node's or a
// relay's is refused in one line, for every command, and a node cannot
// fetch a run's outputs. A node's certificate is not an operator's nor the
// reverse: an operator's key cannot sync as a node.
TEST(FederationTest, OnlyAnOperatorsCertificateMakesAnOperatorsCalls) {
  Federation f;
  f.dir = testing_support::FreshDir("federation", "roles");
  f.certs = MakeCerts(f.dir, 2, "certs", 1, "alice");
  f.Start();
  EnrolAll(f, 2);
  ASSERT_FALSE(f.Operator("submit " + SmallRun(2, 1.0, 1)).is_null());
  // A directory holding a node's (or a relay's) certificate as if it were an operator's.
  for (const std::string who : {"client-0", "relay-0"}) {
    const std::string posing = f.dir + "/as-" + who;
    std::filesystem::create_directories(posing);
    std::filesystem::copy_file(f.certs + "/ca.crt", posing + "/ca.crt");
    std::filesystem::copy_file(f.certs + "/" + who + ".crt", posing + "/operator-mallory.crt");
    std::filesystem::copy_file(f.certs + "/" + who + ".key", posing + "/operator-mallory.key");
    // Every command under a node's key; a relay's, the ones that read or change a run.
    std::vector<std::string> commands = {"runs", "stop 1", "fetch 1 --out " + f.dir + "/stolen"};
    if (who == "client-0") {
      for (const char* more : {"status 1", "wait 1 --timeout 1", "nodes", "revoke 1", "audit", "logs 1"}) {
        commands.push_back(more);
      }
      commands.push_back("submit " + SmallRun(2, 1.0, 1));
      commands.push_back("enrol " + f.certs + "/client-1.crt");
    }
    for (const std::string& command : commands) {
      int code = 0;
      std::string output;
      EXPECT_TRUE(f.Operator(command, &code, &output, posing).is_null()) << who << ": " << command;
      EXPECT_EQ(code, 1) << command;
      EXPECT_NE(output.find("only an operator's certificate (operator-<name>) may make an operator's calls"),
                std::string::npos)
          << who << ": " << command << ": " << output;
      EXPECT_EQ(testing_support::CountLines(output), 1) << output;
    }
  }
  EXPECT_FALSE(FileExists(f.dir + "/stolen/metrics.csv"));
  const nlohmann::json runs = f.Operator("runs");
  ASSERT_EQ(runs.size(), 1u) << "nothing was submitted under a node's key";
  EXPECT_NE(runs[0].at("state"), "stopped");
  // An operator's key as a node's: the federation's node calls refuse it.
  const std::string as_node = f.dir + "/operator-as-node";
  std::filesystem::create_directories(as_node);
  std::filesystem::copy_file(f.certs + "/ca.crt", as_node + "/ca.crt");
  std::filesystem::copy_file(f.certs + "/operator-alice.crt", as_node + "/client-1.crt");
  std::filesystem::copy_file(f.certs + "/operator-alice.key", as_node + "/client-1.key");
  const int node = f.StartNode("1", "", as_node);
  EXPECT_EQ(f.procs.Wait(node, 60), 1);
  EXPECT_NE(f.procs.Output(node).find("only a node's certificate (client-<k>) may make a node's calls"),
            std::string::npos)
      << f.procs.Output(node);
}

// A run's config is the submitter's, untrusted by the federation and by
// every node: files outside the federation's --data-root are refused at
// submission in one line that quotes nothing of them (/etc/passwd, the
// federation's own key, through "..", through a link in a root); the
// run's server itself refuses them and quotes no file's content; a node
// reads only where its own policy lets a run read, and keeps its own
// budget. Operators: bob, not an admin, neither sees nor reads, fetches or
// stops alice's run, nor enrols, revokes or reads the audit log, each
// refusal audited; alice, the admin, stops bob's run.
TEST(FederationTest, ARunsConfigReadsOnlyWhereThePoliciesLetItAndOperatorsKeepToTheirRoles) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "no Fashion-MNIST (scripts/install-deps.sh)";
  Federation f;
  f.dir = testing_support::FreshDir("federation", "trust");
  f.certs = MakeCerts(f.dir, 2, "certs", 0, "alice,bob");
  const std::string bob = f.dir + "/bob";
  std::filesystem::create_directories(bob);
  for (const char* file : {"ca.crt", "operator-bob.crt", "operator-bob.key"}) {
    std::filesystem::copy_file(f.certs + "/" + file, bob + "/" + file);
  }
  std::filesystem::remove(f.certs + "/operator-bob.crt");
  std::filesystem::remove(f.certs + "/operator-bob.key");
  // The runs' data roots: Debian's data sets, and one holding a table whose
  // header is a secret and a link out to the federation's own key.
  const std::string root = f.dir + "/data", datasets = "/usr/share/datasets";
  std::filesystem::create_directories(root);
  std::filesystem::create_symlink(f.certs + "/server.key", root + "/leak");
  WriteFileAtomic(root + "/secret.csv", "SECRET_COLUMN,label\n1,0\n");
  // A root may not hold the federation's own state or keys.
  for (const std::string& own : {f.dir, f.certs}) {
    const testing_support::CliResult r = testing_support::RunCli(
        "federation serve --state " + f.dir + "/state --listen 127.0.0.1:0 --tls-dir " + f.certs + " --data-root " + own);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.output.find("which no run may read"), std::string::npos) << r.output;
  }
  f.Start("--max-runs 1 --data-root " + root + " --data-root " + datasets);
  EnrolAll(f, 2);

  const std::string small = SmallRun(2, 1.0, 2) + testing_support::kFastFaults;
  for (const std::string& file : {std::string("/etc/passwd"), f.certs + "/server.key", root + "/leak",
                                  root + "/../../../../../../../etc/passwd"}) {
    int code = 0;
    std::string said;
    EXPECT_TRUE(f.Operator("submit " + small + " --set data.name=csv --set data.train_file=" + file +
                               " --set data.targets=nope",
                           &code, &said)
                    .is_null());
    EXPECT_EQ(code, 1);
    EXPECT_NE(said.find("data.train_file = "), std::string::npos) << said;
    EXPECT_NE(said.find("the federation's --data-root"), std::string::npos) << said;
    for (const char* content : {"root:", "BEGIN", "PRIVATE"}) EXPECT_EQ(said.find(content), std::string::npos) << said;
    EXPECT_EQ(testing_support::CountLines(said), 1) << said;
  }
  int code = 0;
  std::string said;
  EXPECT_TRUE(f.Operator("submit " + small + " --set dp.key_dir=" + f.certs, &code, &said).is_null());
  EXPECT_NE(said.find("dp.key_dir: a federation's run uses the federation's keys"), std::string::npos) << said;
  EXPECT_TRUE(f.Operator("runs").empty()) << "nothing refused was kept";
  // The run's server, given such a config by hand, refuses it too; and a
  // table inside the root is read without its content in the error.
  const std::string server = "server --foreign-config --data-root " + root + " --insecure --listen 127.0.0.1:0 " +
                             small + " --set data.name=csv --set data.targets=nope --out " + f.dir + "/direct";
  const testing_support::CliResult outside =
      testing_support::RunCli(server + " --set data.train_file=/etc/passwd --set data.test_file=/etc/passwd");
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.output.find("data.train_file = /etc/passwd: outside the directories --data-root"),
            std::string::npos)
      << outside.output;
  EXPECT_EQ(outside.output.find("root:"), std::string::npos) << outside.output;
  const testing_support::CliResult secret = testing_support::RunCli(
      server + " --set data.train_file=" + root + "/secret.csv --set data.test_file=" + root + "/secret.csv");
  EXPECT_EQ(secret.code, 1);
  EXPECT_NE(secret.output.find("unknown target column \"nope\", header has: (withheld)"), std::string::npos)
      << secret.output;
  EXPECT_EQ(secret.output.find("SECRET"), std::string::npos) << secret.output;
  // A split's name is no path either.
  const testing_support::CliResult split = testing_support::RunCli(
      server + " --set data.name=emnist --set data.emnist_split=../../../../etc/x");
  EXPECT_EQ(split.code, 1);
  EXPECT_NE(split.output.find("data.emnist_split '../../../../etc/x': a split's name, a-z only"), std::string::npos)
      << split.output;

  // Inside the federation's root, the run is submitted; node 0, whose
  // policy names no directory, refuses it; node 1 reads the root and serves
  // it under its own budget, whatever the run asks.
  const std::string policy = f.dir + "/policy.toml";
  WriteFileAtomic(policy, "[paths]\nread = [\"" + datasets + "\"]\n");
  f.StartNode("0");
  f.StartNode("1", "--policy " + policy);
  const std::string inside = small + " --set data.dir=" + datasets +
                             "/fashion-mnist --set deploy.min_clients=1 --set deploy.min_results=1 --set dp.client_budget=1000000";
  ASSERT_FALSE(f.Operator("submit --name alices " + inside, &code, &said).is_null()) << said;
  const std::string long_run = SmallRun(2, 1.0, 200) + testing_support::kFastFaults;
  ASSERT_FALSE(f.Operator("submit --name bobs " + long_run, nullptr, nullptr, bob).is_null());

  for (const std::string& command : {std::string("status 1"), std::string("logs 1"), std::string("wait 1 --timeout 1"),
                                     "fetch 1 --out " + f.dir + "/stolen",
                                     std::string("stop 1")}) {
    EXPECT_TRUE(f.Operator(command, &code, &said, bob).is_null()) << command;
    EXPECT_EQ(code, 1) << command;
    EXPECT_NE(said.find("operator-bob may not"), std::string::npos) << command << ": " << said;
    EXPECT_NE(said.find("run 1: another operator submitted it"), std::string::npos) << command << ": " << said;
    EXPECT_EQ(testing_support::CountLines(said), 1) << said;
  }
  EXPECT_FALSE(FileExists(f.dir + "/stolen/metrics.csv"));
  for (const std::string& command : {std::string("enrol ") + f.certs + "/client-0.crt", std::string("revoke 0"),
                                     std::string("audit")}) {
    EXPECT_TRUE(f.Operator(command, &code, &said, bob).is_null()) << command;
    EXPECT_NE(said.find("that is an admin's"), std::string::npos) << command << ": " << said;
  }
  const nlohmann::json bobs = f.Operator("runs", nullptr, nullptr, bob);
  ASSERT_EQ(bobs.size(), 1u) << bobs;
  EXPECT_EQ(bobs[0].at("name"), "bobs");
  ASSERT_FALSE(f.Operator("stop 2", &code, &said).is_null()) << "alice, the admin, stops bob's run: " << said;

  const nlohmann::json alices = f.WaitFor(1, 120);
  ASSERT_EQ(alices.at("state"), "finished") << alices << ReadFile(f.dir + "/state/runs/1/log.txt");
  EXPECT_EQ(alices.at("nodes"), nlohmann::json::array({1}));
  ASSERT_EQ(alices.at("refusals").size(), 1u) << alices;
  EXPECT_EQ(alices.at("refusals")[0].at("node"), 0);
  EXPECT_EQ(alices.at("refusals")[0].at("rule"),
            "data.dir = " + datasets + "/fashion-mnist: outside the directories this node's policy (none given, [paths] read) "
            "lets a run read (it names none)");
  EXPECT_NE(f.procs.Output(f.nodes[1]).find("run 1 sets dp.client_budget = 1000000; this node's clients keep "
                                            "their own (0)"),
            std::string::npos)
      << f.procs.Output(f.nodes[1]);
  const nlohmann::json stopped = f.WaitFor(2, 60);
  EXPECT_EQ(stopped.at("state"), "stopped") << stopped;
  int refusals = 0;
  for (const auto& entry : f.Operator("audit")) {
    refusals += entry.at("actor") == "operator-bob" && entry.at("action") == "refused";
  }
  EXPECT_EQ(refusals, 8) << "each of bob's refused calls";
}

}  // namespace
}  // namespace fedprof
