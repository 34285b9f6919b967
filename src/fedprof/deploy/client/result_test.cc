#include "fedprof/deploy/client/result.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fedprof/protocol/wire.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

// Every message of `chunks`, and whether each was the last.
std::vector<std::pair<pb::ResultChunk, bool>> AllMessages(ResultChunks chunks) {
  std::vector<std::pair<pb::ResultChunk, bool>> messages;
  while (!chunks.finished()) {
    pb::ResultChunk message;
    const bool last = chunks.Next(&message);
    messages.emplace_back(message, last);
    if (messages.size() > 1000) break;
  }
  return messages;
}

FitResult TrainedResult(size_t values) {
  FitResult r;
  r.ok = true;
  r.client_id = 6;
  r.num_samples = 40;
  r.cost.profiling_time_s = 0.5;
  for (size_t i = 0; i < values; ++i) r.params.push_back(static_cast<float>(i) + 0.25f);
  return r;
}

TEST(ClientResultChunksTest, TheHeaderThenTheModelInChunksOfTheAskedSize) {
  const FitResult result = TrainedResult(10);
  // 16 bytes: four values a chunk.
  const auto messages = AllMessages(ResultChunks(result, "s1", 77, 1.5, 16));
  ASSERT_EQ(messages.size(), 4u);
  const pb::ResultHeader& h = messages[0].first.header();
  EXPECT_EQ(h.session(), "s1");
  EXPECT_EQ(h.task_id(), 77);
  EXPECT_EQ(h.client_id(), 6);
  EXPECT_EQ(h.num_params(), 10);
  EXPECT_EQ(h.num_samples(), 40);
  EXPECT_EQ(h.compute_s(), 1.5);
  EXPECT_EQ(h.profiling_s(), 0.5);
  FlatParams model;
  for (size_t i = 1; i < messages.size(); ++i) {
    ASSERT_TRUE(messages[i].first.has_params());
    AppendFloats(messages[i].first.params(), 10, &model);
  }
  EXPECT_EQ(messages[1].first.params().size(), 16u);
  EXPECT_EQ(messages[3].first.params().size(), 8u);
  EXPECT_EQ(model, result.params);
  for (size_t i = 0; i < messages.size(); ++i) EXPECT_EQ(messages[i].second, i + 1 == messages.size()) << i;
}

TEST(ClientResultChunksTest, AResultWithoutAModelIsItsHeaderAlone) {
  FitResult failed;
  failed.error = "refused";
  const auto messages = AllMessages(ResultChunks(failed, "s1", 1, 0, 1 << 20));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(messages[0].second);
  EXPECT_FALSE(messages[0].first.header().ok());
  EXPECT_EQ(messages[0].first.header().error(), "refused");
}

TEST(ClientResultChunksTest, AChunkHoldsAtLeastOneValue) {
  const auto messages = AllMessages(ResultChunks(TrainedResult(3), "s1", 1, 0, 1));
  ASSERT_EQ(messages.size(), 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(messages[i].first.params().size(), sizeof(float));
}

}  // namespace
}  // namespace fedprof
