#include "fedprof/distributed/distributed_transport.h"

#include <gtest/gtest.h>

#include <vector>

namespace fedprof {
namespace {

TEST(AssignRanksTest, ClientsKeepingStateLiveOnRankKModW) {
  const std::vector<int64_t> sizes(10, 100);
  EXPECT_EQ(AssignRanks({7, 2, 9, 4}, /*keeps_state=*/true, 3, sizes),
            (std::vector<int>{1, 2, 0, 1}));
}

TEST(AssignRanksTest, EqualClientsAreDealtOutInIdOrder) {
  const std::vector<int64_t> sizes(10, 100);
  // Ranks 0, 1, 2, 0, 1 to clients 1, 3, 4, 6, 8, whatever the list order.
  EXPECT_EQ(AssignRanks({8, 1, 6, 3, 4}, false, 3, sizes), (std::vector<int>{1, 0, 0, 1, 2}));
}

TEST(AssignRanksTest, LargestFirstToTheLeastLoadedRank) {
  const std::vector<int64_t> sizes = {50, 10, 40, 30, 20, 60};
  const std::vector<int> ids = {0, 1, 2, 3, 4, 5};
  const std::vector<int> rank = AssignRanks(ids, false, 2, sizes);
  // 60 -> r0, 50 -> r1, 40 -> r1 (50 < 60), 30 -> r0 (60 < 90), 20 -> r0 (90 = 90: lowest),
  // 10 -> r1: loads 110 and 100.
  EXPECT_EQ(rank, (std::vector<int>{1, 1, 1, 0, 0, 0}));
  std::vector<int64_t> load(2, 0);
  for (size_t i = 0; i < ids.size(); ++i) load[rank[i]] += sizes[ids[i]];
  EXPECT_EQ(load, (std::vector<int64_t>{110, 100}));
}

TEST(AssignRanksTest, ClientsProfiledTogetherShareARank) {
  const std::vector<int64_t> sizes = {10, 10, 10, 30, 5, 5, 40, 1};
  const std::vector<int> ids = {7, 6, 5, 4, 3, 2, 1, 0};
  // Groups of 3 ids: {0,1,2} 30 samples, {3,4,5} 40, {6,7} 41: 41 -> r0,
  // 40 -> r1, 30 -> r1 (40 < 41).
  EXPECT_EQ(AssignRanks(ids, false, 2, sizes, /*group=*/3),
            (std::vector<int>{0, 0, 1, 1, 1, 1, 1, 1}));
  // Groups of 1 are the clients themselves.
  EXPECT_EQ(AssignRanks(ids, false, 2, sizes, 1), AssignRanks(ids, false, 2, sizes));
}

}  // namespace
}  // namespace fedprof
