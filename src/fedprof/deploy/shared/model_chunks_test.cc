#include "fedprof/deploy/shared/model_chunks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

std::string FloatBytes(const FlatParams& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(ModelChunksTest, AModelCountsOnceAllItsChunksCame) {
  ModelChunks model(5);
  model.Add(FloatBytes({1, 2}));
  EXPECT_FALSE(model.whole());
  model.Add(FloatBytes({}));
  model.Add(FloatBytes({3, 4, 5}));
  EXPECT_TRUE(model.whole());
  EXPECT_EQ(*model.Take(), FlatParams({1, 2, 3, 4, 5}));
}

TEST(ModelChunksTest, AChunkOfPartFloatsOrPastTheStatedSizeIsRefused) {
  ModelChunks model(3);
  EXPECT_THROW(model.Add(std::string(5, '\0')), Error);
  model.Add(FloatBytes({1, 2}));
  try {
    model.Add(FloatBytes({3, 4}));
    ADD_FAILURE() << "took a chunk past the 3 values stated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the 3 values announced"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(model.whole());
}

TEST(ModelChunksTest, AHugeStatedSizeIsNotReservedBeforeItArrives) {
  ModelChunks model(size_t{1} << 31);
  EXPECT_FALSE(model.whole());
  model.Add(FloatBytes({1}));
  EXPECT_LE(model.Take()->capacity(), size_t{1} << 24);
}

}  // namespace
}  // namespace fedprof
