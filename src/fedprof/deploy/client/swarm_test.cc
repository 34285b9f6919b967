#include "fedprof/deploy/client/swarm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/deploy/shared/tls.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

TEST(ClientSwarmTest, OneWorkerRunsWhatIsPostedInOrderAndFinishesItsQueue) {
  std::vector<int> ran;
  {
    WorkerPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Post([&ran, i] { ran.push_back(i); });
  }
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
}

TEST(ClientSwarmTest, TimersFireInTheOrderOfTheirTimesAndDropWhatIsStillDue) {
  std::vector<int> fired;
  std::promise<void> both;
  std::atomic<bool> late{false};
  {
    TimerThread timers;
    timers.After(0.2, [&] {
      fired.push_back(2);
      both.set_value();
    });
    timers.After(0.05, [&] { fired.push_back(1); });
    timers.After(3600, [&] { late = true; });
    ASSERT_EQ(both.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  }
  EXPECT_EQ(fired, std::vector<int>({1, 2}));
  EXPECT_FALSE(late);
}

TEST(ClientSwarmTest, AwaitAllReturnsOnceEveryClientFinished) {
  ClientSwarm swarm(/*workers=*/2, /*clients=*/3);
  EXPECT_TRUE(swarm.many());
  for (int i = 0; i < 3; ++i) swarm.work().Post([&swarm] { swarm.Finished(); });
  swarm.AwaitAll();
  EXPECT_FALSE(ClientSwarm(1, 1).many());
}

TEST(ClientSwarmTest, TheRosterIsReadOnceForAllClients) {
  const std::string dir = testing_support::FreshDir("ClientSwarmTest", "roster");
  GenerateClientKeys(dir, 3);
  std::filesystem::copy_file(dir + "/client-3.secagg.pub", dir + "/secagg-roster");
  ClientSwarm swarm(1, 2);
  const auto roster = swarm.RosterOf(dir);
  ASSERT_EQ(roster->size(), 1u);
  EXPECT_EQ(roster->at(3), SecAggSigningKey(dir, 3).public_key);
  std::filesystem::remove(dir + "/secagg-roster");
  EXPECT_EQ(swarm.RosterOf(dir), roster);
  EXPECT_THROW(swarm.RosterOf(dir + "/elsewhere"), Error);
}

}  // namespace
}  // namespace fedprof
