// Client::Fit's first step: where training starts, and what FedBN keeps.
#include "fedprof/client/local_state.h"

#include <gtest/gtest.h>

#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

// Six values: a weight (0..2), batch norm (3..4), a bias (5).
ParamLayout SixValues() {
  ParamLayout layout;
  layout.entries.push_back({"fc.weight", 0, 3, false, false});
  layout.entries.push_back({"bn.weight", 3, 1, false, true});
  layout.entries.push_back({"bn.running_mean", 4, 1, true, true});
  layout.entries.push_back({"fc.bias", 5, 1, false, false});
  layout.total = 6;
  return layout;
}

const FlatParams kGlobal = {1, 2, 3, 4, 5, 6};

LocalObjective FedBn() {
  LocalObjective objective;
  objective.keep_local_batch_norm = true;
  return objective;
}

TEST(LocalStateTest, WithoutFedBnTrainingStartsFromTheGlobalModel) {
  const TrainingStart start = StartOfTraining(LocalObjective(), SixValues(), {9, 9}, kGlobal);
  EXPECT_FALSE(start.from_own);
  EXPECT_TRUE(start.batch_norm.empty()) << "nothing is kept";
  EXPECT_EQ(&start.Params(kGlobal), &kGlobal);
  EXPECT_TRUE(LocalStateAfter(start, {7, 7, 7, 7, 7, 7}).empty());
}

TEST(LocalStateTest, FedBnsFirstRoundStartsFromTheGlobalModelAndKeepsItsBatchNorm) {
  const TrainingStart start = StartOfTraining(FedBn(), SixValues(), {}, kGlobal);
  EXPECT_FALSE(start.from_own);
  ASSERT_EQ(start.batch_norm.size(), 2u);
  EXPECT_EQ(start.batch_norm[0], (std::pair<int64_t, int64_t>(3, 1)));
  EXPECT_EQ(start.batch_norm[1], (std::pair<int64_t, int64_t>(4, 1)));
  EXPECT_EQ(start.Params(kGlobal), kGlobal);
  EXPECT_EQ(LocalStateAfter(start, {10, 20, 30, 40, 50, 60}), (FlatParams{40, 50}));
}

TEST(LocalStateTest, FedBnStartsFromTheGlobalModelWithTheKeptBatchNorm) {
  const TrainingStart start = StartOfTraining(FedBn(), SixValues(), {-1, -2}, kGlobal);
  EXPECT_TRUE(start.from_own);
  EXPECT_EQ(start.Params(kGlobal), (FlatParams{1, 2, 3, -1, -2, 6}));
  EXPECT_EQ(kGlobal, (FlatParams{1, 2, 3, 4, 5, 6})) << "θ itself is untouched";
}

TEST(LocalStateTest, KeptStateOfAnotherModelIsRefused) {
  ExpectError([] { StartOfTraining(FedBn(), SixValues(), {1, 2, 3}, kGlobal); },
              {"local batch norm of 3 values", "2 batch-norm values"});
}

}  // namespace
}  // namespace fedprof
