#include "fedprof/fbftl/payload.h"

#include <gtest/gtest.h>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

// The FbFTL paper's Table III: VGG-16 at 3x224x224, 10 classes, U = 6250,
// K_u = 8, U C = 8, d = 32, cut before the second dense layer.
class PayloadTest : public ::testing::Test {
 protected:
  std::vector<LayerCount> layers = DescribeLayers("vgg16", 3, 224, 224, 10);
  std::vector<SchemePayload> rows = ClosedFormPayloads(layers, "fc2", PayloadSetup());
  const SchemePayload& Row(const std::string& name) {
    for (const auto& r : rows) {
      if (r.scheme == name) return r;
    }
    throw Error("no row " + name);
  }
};

TEST_F(PayloadTest, ParameterCountsMatchThePaper) {
  int64_t total = 0, conv = 0;
  for (const auto& l : layers) {
    total += l.params;
    if (l.name.rfind("conv", 0) == 0) conv += l.params;
  }
  EXPECT_EQ(total, 153144650);
  EXPECT_EQ(conv, 14714688);
  EXPECT_EQ(Row("FL").params_per_batch, 153144650);
  EXPECT_EQ(Row("FTL_c").params_per_batch, 35665418);
  EXPECT_EQ(Row("FbFTL").params_per_batch, 4096);
}

TEST_F(PayloadTest, PerBatchAndTotalPayloadsMatchTableIII) {
  EXPECT_NEAR(Row("FL").bits_per_batch, 4.9e9, 0.05e9);
  EXPECT_NEAR(Row("FTL_c").bits_per_batch, 1.1e9, 0.05e9);
  EXPECT_NEAR(Row("FbFTL").bits_per_batch, 131e3, 1e3);
  EXPECT_EQ(Row("FL").upload_batches, 656250);
  EXPECT_EQ(Row("FTL_f").upload_batches, 193750);
  EXPECT_EQ(Row("FTL_c").upload_batches, 525000);
  EXPECT_EQ(Row("FbFTL").upload_batches, 50000);
  EXPECT_NEAR(Row("FL").uplink_bits / 1e12, 3216, 1);
  EXPECT_NEAR(Row("FTL_f").uplink_bits / 1e12, 949, 1);
  EXPECT_NEAR(Row("FTL_c").uplink_bits / 1e12, 599, 1);
  EXPECT_NEAR(Row("FbFTL").uplink_bits / 1e9, 6.6, 0.05);
  EXPECT_NEAR(Row("FL").downlink_bits / 1e12, 402, 1);
  EXPECT_NEAR(Row("FTL_c").downlink_bits / 1e12, 322, 1);
  EXPECT_NEAR(Row("FbFTL").downlink_bits / 1e9, 3.8, 0.05);
}

TEST_F(PayloadTest, ClientComputeMatchesTableIII) {
  EXPECT_NEAR(Row("FL").client_macs / 1.63e17, 1.0, 0.01);
  EXPECT_NEAR(Row("FTL_f").client_macs / 4.80e16, 1.0, 0.01);
  EXPECT_NEAR(Row("FTL_c").client_macs / 1.07e15, 1.0, 0.01);
  EXPECT_NEAR(Row("FbFTL").client_macs / 7.74e14, 1.0, 0.01);
}

// SFL as implemented (smashed data of all K_u samples plus the client part's
// gradient) lands on Table III's totals: 2467 Tb up, 308 Tb down.
TEST_F(PayloadTest, SplitLearningTotalsMatchTableIII) {
  EXPECT_EQ(Row("SFL").params_per_batch, 117479232 + 8 * 4096);
  EXPECT_NEAR(Row("SFL").uplink_bits / 1e12, 2467, 2);
  EXPECT_NEAR(Row("SFL").downlink_bits / 1e12, 308, 2);
  EXPECT_NEAR(Row("SFL").client_macs / 1.63e17, 1.0, 0.01);
}

TEST_F(PayloadTest, UnknownNamesAreRefused) {
  EXPECT_THROW(DescribeLayers("vgg19", 3, 224, 224, 10), Error);
  EXPECT_THROW(ClosedFormPayloads(layers, "fc9", PayloadSetup()), Error);
}

}  // namespace
}  // namespace fedprof
