#include "fedprof/distributed/rank_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "tests/processes.h"

namespace fedprof {
namespace {

using testing_support::FreePort;

DistEnv Read(const std::map<std::string, std::string>& vars) {
  return ReadDistEnv([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string ErrorOf(const std::map<std::string, std::string>& vars) {
  try {
    Read(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DistEnvTest, UnsetOrOneRankIsAPlainRun) {
  EXPECT_FALSE(Read({}).distributed());
  EXPECT_FALSE(Read({{"WORLD_SIZE", "1"}, {"RANK", "junk"}}).distributed());
}

TEST(DistEnvTest, ReadsTheTorchrunVariables) {
  const DistEnv env = Read({{"WORLD_SIZE", "3"},
                            {"RANK", "2"},
                            {"MASTER_ADDR", "10.0.0.1"},
                            {"MASTER_PORT", "29500"},
                            {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_TRUE(env.distributed());
  EXPECT_EQ(env.world_size, 3);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_FALSE(env.agent_store);
  const DistEnv torchrun = Read({{"WORLD_SIZE", "2"},
                                 {"RANK", "0"},
                                 {"MASTER_ADDR", "127.0.0.1"},
                                 {"MASTER_PORT", "29500"},
                                 {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                 {"TORCHELASTIC_RESTART_COUNT", "1"}});
  EXPECT_TRUE(torchrun.agent_store);
  EXPECT_EQ(torchrun.store_prefix, "/worker/attempt_1");
}

TEST(DistEnvTest, AMalformedVariableIsNamed) {
  const std::map<std::string, std::string> ok = {
      {"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& key, const std::string& value) {
    auto vars = ok;
    if (value.empty()) {
      vars.erase(key);
    } else {
      vars[key] = value;
    }
    return ErrorOf(vars);
  };
  EXPECT_EQ(ErrorOf(ok), "");
  EXPECT_EQ(with("WORLD_SIZE", "two").rfind("WORLD_SIZE: 'two'", 0), 0u) << with("WORLD_SIZE", "two");
  EXPECT_EQ(with("WORLD_SIZE", "0").rfind("WORLD_SIZE: '0'", 0), 0u);
  EXPECT_EQ(with("RANK", "2").rfind("RANK: '2' is not a rank in 0..1", 0), 0u) << with("RANK", "2");
  EXPECT_EQ(with("RANK", "").rfind("RANK: not set", 0), 0u);
  EXPECT_EQ(with("MASTER_ADDR", "").rfind("MASTER_ADDR: not set", 0), 0u);
  EXPECT_EQ(with("MASTER_PORT", "70000").rfind("MASTER_PORT: '70000'", 0), 0u);
  EXPECT_EQ(with("MASTER_PORT", "80a").rfind("MASTER_PORT: '80a'", 0), 0u);
  EXPECT_EQ(with("LOCAL_WORLD_SIZE", "3").rfind("LOCAL_WORLD_SIZE: '3'", 0), 0u);
}

DistEnv Env(int rank, int port) {
  DistEnv env;
  env.rank = rank;
  env.world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  return env;
}

// Two ranks in one process, one per thread, as the c10d tests do it.
TEST(RankGroupTest, MessagesArriveWholeAndSilenceEndsInANamedTimeout) {
  const int port = FreePort();
  auto peer = std::async(std::launch::async, [port] {
    RankGroup one(Env(1, port), 20);
    RankMessage m = one.Recv(0);
    m.kind += 100;
    one.Send(0, m);
    one.Send(0, RankMessage());  // every part empty
    one.set_timeout(1);
    try {
      one.Recv(0);  // rank 0 sends nothing more
    } catch (const RankError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  });
  RankGroup zero(Env(0, port), 20);
  EXPECT_EQ(zero.rank(), 0);
  EXPECT_EQ(zero.size(), 2);
  RankMessage m;
  m.kind = 7;
  m.arg = -3;
  m.bytes = std::string("a\0b", 3);
  m.ids = {4, 0, 2};
  m.floats = std::make_shared<const FlatParams>(FlatParams{1.5f, -0.0f, 3e-38f});
  zero.Send(1, m);
  const RankMessage back = zero.Recv(1);
  EXPECT_EQ(back.kind, 107);
  EXPECT_EQ(back.arg, -3);
  EXPECT_EQ(back.bytes, m.bytes);
  EXPECT_EQ(back.ids, m.ids);
  ASSERT_TRUE(back.floats);
  EXPECT_EQ(*back.floats, *m.floats);
  const RankMessage empty = zero.Recv(1);
  EXPECT_EQ(empty.kind, 0);
  EXPECT_TRUE(empty.bytes.empty() && empty.ids.empty() && !empty.floats);
  EXPECT_EQ(peer.get(), "rank 0 sent nothing for 1 s (dist.timeout_s)");
}

TEST(RankGroupTest, CancelEndsAWaitingReceive) {
  const int port = FreePort();
  auto peer = std::async(std::launch::async, [port] {
    RankGroup one(Env(1, port), 20);
    one.Send(0, RankMessage());
    std::this_thread::sleep_for(std::chrono::seconds(2));  // keeps the group up
  });
  RankGroup zero(Env(0, port), 20);
  zero.Recv(1);
  auto waiting = std::async(std::launch::async, [&zero] {
    try {
      zero.Recv(1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  zero.Cancel();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(waiting.get(), "the run was stopped after another rank failed");
  EXPECT_THROW(zero.Send(1, RankMessage()), Error);
  peer.get();
}

}  // namespace
}  // namespace fedprof
