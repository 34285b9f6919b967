#include "fedprof/federation/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "tests/expect_error.h"

namespace fedprof::federation {
namespace {

using testing_support::ExpectError;

std::string PolicyFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/policy_" + name + ".toml";
  WriteFileAtomic(path, text);
  return path;
}

Config ConfigWith(const std::vector<std::string>& sets) {
  Config config;
  for (const std::string& s : sets) config.SetAssignment(s, "test");
  return config;
}

// Each rule, met and broken: the refusal names the rule and what the run has.
TEST(NodePolicyTest, EachRuleRefusesWhatBreaksItInOneLine) {
  const NodePolicy policy = LoadPolicy(PolicyFile("rules",
                                                  "[allow]\n\"strategy.name\" = [\"fedavg\", \"fedprof\"]\n"
                                                  "\"secagg.protocol\" = [\"secagg+\"]\n"
                                                  "[at_least]\n\"secagg.corrupt\" = 0.05\n"
                                                  "[at_most]\n\"rounds\" = 100\n"
                                                  "[limits]\nmin_cohort = 5\n"));
  const std::vector<std::string> good = {"strategy.name=fedprof", "secagg.protocol=secagg+", "secagg.corrupt=0.1",
                                         "rounds=50", "clients.count=20", "strategy.fraction=0.25"};
  EXPECT_EQ(PolicyRefusal(policy, ConfigWith(good)), "");
  const auto broken = [&](const std::string& set) {
    std::vector<std::string> sets = good;
    sets.push_back(set);
    return PolicyRefusal(policy, ConfigWith(sets));
  };
  EXPECT_EQ(broken("strategy.name=afl"), "policy allow \"strategy.name\" = [fedavg, fedprof]: the run has afl");
  EXPECT_EQ(broken("secagg.protocol=none"), "policy allow \"secagg.protocol\" = [secagg+]: the run has none");
  EXPECT_EQ(broken("secagg.corrupt=0.01"), "policy at_least \"secagg.corrupt\" = 0.05: the run has 0.01");
  EXPECT_EQ(broken("rounds=101"), "policy at_most \"rounds\" = 100: the run has 101");
  EXPECT_EQ(broken("strategy.fraction=0.1"), "policy limits min_cohort = 5: the run asks 2 clients a round");
  for (const char* set : {"strategy.name=afl", "rounds=101"}) {
    EXPECT_EQ(broken(set).find('\n'), std::string::npos);
  }
}

// max_epsilon: epsilon against the server, infinite without the clients'
// own noise, and within bounds only for enough noise over the run.
TEST(NodePolicyTest, MaxEpsilonBoundsTheEpsilonAgainstTheServer) {
  const NodePolicy policy = LoadPolicy(PolicyFile("epsilon", "[limits]\nmax_epsilon = 4\n"));
  EXPECT_TRUE(std::isinf(EpsilonAgainstTheServer(ConfigWith({"dp.mode=central", "dp.noise_multiplier=5"}))));
  const std::string central = PolicyRefusal(policy, ConfigWith({"dp.mode=central"}));
  EXPECT_NE(central.find("infinite (no distributed DP)"), std::string::npos) << central;
  const Config noisy = ConfigWith({"dp.mode=distributed", "dp.noise_multiplier=8", "rounds=10", "clients.count=100"});
  const double epsilon = EpsilonAgainstTheServer(noisy);
  EXPECT_GT(epsilon, 0);
  EXPECT_LT(epsilon, 4);
  EXPECT_EQ(PolicyRefusal(policy, noisy), "");
  const Config thin = ConfigWith({"dp.mode=distributed", "dp.noise_multiplier=0.5", "rounds=100", "clients.count=100"});
  EXPECT_GT(EpsilonAgainstTheServer(thin), 4);
  EXPECT_NE(PolicyRefusal(policy, thin).find("policy limits max_epsilon = 4: the run's epsilon against the server is"),
            std::string::npos);
}

// A node's keys, key directory, budget and report cap are its own: a run
// that sets them is run under the node's [client] values, or the defaults
// where it has none; its budget applies only under distributed DP.
TEST(NodePolicyTest, ARunNeverSetsANodesKeysOrBudget) {
  const NodePolicy own = LoadPolicy(PolicyFile("own",
                                               "[client]\n\"dp.client_budget\" = 4\n"
                                               "\"secagg.client_reports\" = 50\n[paths]\nread = [\"/srv/data\"]\n"));
  EXPECT_EQ(own.read_roots, std::vector<std::string>{"/srv/data"});
  const Config asked = ConfigWith({"dp.mode=distributed", "dp.noise_multiplier=1", "dp.key_dir=/tmp/operator-keys",
                                   "dp.client_budget=1000000", "secagg.client_reports=1000000000"});
  const Config ran = NodeClientConfig(own, asked);
  EXPECT_EQ(ran.options().dp.key_dir, "");
  EXPECT_EQ(ran.options().dp.client_budget, 4);
  EXPECT_EQ(ran.options().secagg.client_reports, 50);
  EXPECT_EQ(ran.options().dp.noise_multiplier, 1) << "the rest is the run's";
  EXPECT_EQ(ran.options().dp.delta, 1e-5) << "the ledger's delta is the node's, not 1/clients.count";
  EXPECT_EQ(NodeClientConfig(own, ConfigWith({"dp.mode=distributed", "dp.delta=0.1"})).options().dp.delta, 1e-5);
  const Config unbounded = NodeClientConfig(NodePolicy{}, ConfigWith({"dp.mode=distributed", "dp.client_unbounded=true"}));
  EXPECT_FALSE(unbounded.options().dp.client_unbounded) << "a run cannot lift the node's default budget";
  EXPECT_EQ(unbounded.options().dp.client_budget, 0) << "0: the default budget of a deployed client";
  EXPECT_EQ(NodeClientConfig(own, ConfigWith({"dp.mode=off"})).options().dp.client_budget, 0)
      << "no budget outside distributed DP";
  ExpectError([] { LoadPolicy(PolicyFile("own_other", "[client]\n\"rounds\" = 3\n")); },
              {"not one of a node's own options"});
  ExpectError([] { LoadPolicy(PolicyFile("own_both", "[client]\n\"dp.client_budget\" = 4\n\"dp.client_unbounded\" = true\n")); },
              {"a budget, or none, not both"});
  ExpectError([] { LoadPolicy(PolicyFile("relative", "[paths]\nread = [\"data\"]\n")); }, {"an absolute path"});
  ExpectError([] { LoadPolicy(PolicyFile("paths_key", "[paths]\nwrite = [\"/srv\"]\n")); }, {"read = ["});
}

// A policy that does not say what its writer meant serves nothing: one line
// naming the file and the key.
TEST(NodePolicyTest, APolicyThatDoesNotParseIsRefusedNamingItsKey) {
  ExpectError([] { LoadPolicy(PolicyFile("unknown", "[allow]\n\"strategy.nmae\" = [\"fedavg\"]\n")); },
              {"policy_unknown.toml", "'strategy.nmae' is no option", "strategy.name"});
  ExpectError([] { LoadPolicy(PolicyFile("value", "[allow]\n\"strategy.name\" = [\"fedavgg\"]\n")); },
              {"policy_value.toml", "strategy.name"});
  ExpectError([] { LoadPolicy(PolicyFile("text", "[at_most]\n\"strategy.name\" = 3\n")); },
              {"not a numeric option"});
  ExpectError([] { LoadPolicy(PolicyFile("table", "[deny]\n\"rounds\" = 3\n")); }, {"[deny] is no table"});
  ExpectError([] { LoadPolicy(PolicyFile("limit", "[limits]\nmax_rounds = 3\n")); }, {"no such limit"});
  ExpectError([] { LoadPolicy(PolicyFile("empty", "[allow]\n\"rounds\" = []\n")); }, {"a list of the values allowed"});
  ExpectError([] { LoadPolicy(PolicyFile("toml", "[allow\n")); }, {"policy_toml.toml"});
  ExpectError([] { LoadPolicy(::testing::TempDir() + "/no_such_policy.toml"); }, {"no_such_policy.toml"});
}

// Rounds a day: each client's count on its own, kept across a restart (a
// new RoundsPerDay on the same directory), begun again on another day; a
// count file that does not parse refuses, naming it.
TEST(NodePolicyTest, RoundsPerDayCountsEachClientsDayAcrossRestarts) {
  EXPECT_EQ(LoadPolicy(PolicyFile("daily", "[limits]\nrounds_per_day = 2\n")).rounds_per_day, 2);
  ExpectError([] { LoadPolicy(PolicyFile("daily0", "[limits]\nrounds_per_day = 0\n")); },
              {"rounds_per_day", "at least 1"});
  ExpectError([] { LoadPolicy(PolicyFile("daily_half", "[limits]\nrounds_per_day = 1.5\n")); }, {"whole number"});

  const std::string dir = ::testing::TempDir() + "/rounds_per_day";
  std::filesystem::remove_all(dir);
  MakeDirs(dir);
  {
    RoundsPerDay rounds(dir, 2);
    EXPECT_EQ(rounds.Take(3, "2026-12-01"), "");
    EXPECT_EQ(rounds.Take(3, "2026-12-01"), "");
    EXPECT_EQ(rounds.Take(4, "2026-12-01"), "") << "client 4 counts on its own";
    EXPECT_EQ(rounds.Take(3, "2026-12-01"),
              "policy limits rounds_per_day = 2: client 3 has trained 2 rounds on 2026-12-01 (UTC)");
  }
  RoundsPerDay restarted(dir, 2);
  EXPECT_NE(restarted.Take(3, "2026-12-01"), "");
  EXPECT_EQ(restarted.Take(3, "2026-12-02"), "") << "another day";
  EXPECT_EQ(ReadFile(dir + "/client-3.rounds"), "2026-12-02 1\n");
  EXPECT_EQ(restarted.Take(6), "");  // today, whatever day it is
  WriteFileAtomic(dir + "/client-5.rounds", "garbage\n");
  EXPECT_NE(restarted.Take(5, "2026-12-01").find("client-5.rounds is not"), std::string::npos);
}

}  // namespace
}  // namespace fedprof::federation
