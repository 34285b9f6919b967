#include "fedprof/fbftl/schemes.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/fbftl/pretrain.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {
namespace {

// Ten classes of 1 x side x side images: a fixed random template per class
// plus noise.
Dataset Synthetic(int64_t n, uint64_t seed, int64_t side = 8) {
  torch::manual_seed(7);
  const at::Tensor templates = (torch::rand({10, 1, side, side}) > 0.5).to(torch::kFloat32);
  torch::manual_seed(seed);
  Dataset d;
  d.y = torch::randint(0, 10, {n}, torch::kInt64);
  d.x = templates.index_select(0, d.y) + 0.3 * torch::randn({n, 1, side, side});
  d.num_classes = 10;
  d.name = "synthetic";
  return d;
}

std::shared_ptr<StagedModel> Source() {
  torch::manual_seed(1);
  auto net = MakeStagedModel("vgg_small", {1, 8, 8}, 10);
  net->Reinitialize(0, net->num_stages());
  return net;
}

// The schemes of `c`'s transfer.* options on `source`.
std::vector<SchemeRun> RunSchemes(const Config& c, const StagedModel& source, const Dataset& train,
                           const Dataset& test) {
  return RunTransferSchemes(c.options().transfer, static_cast<uint64_t>(c.options().seed), source,
                            train, test);
}

Config Small() {
  Config c;
  c.Set("transfer.clients", "8");
  c.Set("transfer.samples_per_client", "4");
  c.Set("transfer.fraction", "0.25");
  c.Set("transfer.epochs", "2");
  c.Set("transfer.head_epochs", "2");
  return c;
}

const SchemeRun& Find(const std::vector<SchemeRun>& runs, const std::string& scheme) {
  for (const auto& r : runs) {
    if (r.scheme == scheme) return r;
  }
  throw Error("no run " + scheme);
}

// Every byte a run serialises is counted; the values' bits equal the closed
// forms (Eqs. 2-17) exactly, and message framing adds under 2%.
TEST(TransferSchemesTest, SerialisedPayloadMatchesTheClosedForms) {
  const Dataset train = Synthetic(64, 1), test = Synthetic(50, 2);
  const auto runs = RunSchemes(Small(), *Source(), train, test);
  ASSERT_EQ(runs.size(), 5u);
  for (const SchemeRun& r : runs) {
    SCOPED_TRACE(r.scheme);
    EXPECT_EQ(static_cast<double>(r.upload_batches), r.closed_form.upload_batches);
    EXPECT_EQ(static_cast<double>(r.uplink_value_bits), r.closed_form.uplink_bits);
    EXPECT_EQ(static_cast<double>(r.downlink_value_bits), r.closed_form.downlink_bits);
    EXPECT_GE(static_cast<double>(r.uplink_bytes), r.closed_form.uplink_bits / 8);
    EXPECT_LE(static_cast<double>(r.uplink_bytes), r.closed_form.uplink_bits / 8 * 1.02);
    EXPECT_LE(static_cast<double>(r.downlink_bytes), r.closed_form.downlink_bits / 8 * 1.02);
    EXPECT_NEAR(r.client_macs / r.closed_form.client_macs, 1.0, 1e-12);
    EXPECT_EQ(r.lost_uploads + r.rejected_uploads, 0);
  }
  // FbFTL sends each sample's 256 features once: 32 x 256 bits per sample.
  EXPECT_EQ(Find(runs, "FbFTL").uplink_value_bits, 32 * 256 * 32);
}

TEST(TransferSchemesTest, SameSeedSameNumbers) {
  const Dataset train = Synthetic(64, 1), test = Synthetic(50, 2);
  Config c = Small();
  c.Set("transfer.schemes", "FTL_c,FbFTL");
  const auto a = RunSchemes(c, *Source(), train, test);
  const auto b = RunSchemes(c, *Source(), train, test);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].accuracy, b[i].accuracy);
    EXPECT_EQ(a[i].uplink_bytes, b[i].uplink_bytes);
  }
}

// FbFTL trains the same head on the same features as FTL_c: transferred
// from a source pretrained on related data, both learn the task.
TEST(TransferSchemesTest, FbftlLearnsLikeFtlc) {
  const Dataset train = Synthetic(400, 1, 16), test = Synthetic(300, 2, 16);
  Config c;
  c.Set("pretrain.epochs", "6");
  torch::manual_seed(1);
  auto source = MakeStagedModel("lenet5", {1, 16, 16}, 10);
  source->Reinitialize(0, source->num_stages());
  EXPECT_GT(Pretrain(c.options().pretrain, static_cast<uint64_t>(c.options().seed), *source,
                     Synthetic(400, 3, 16), test),
            0.5);
  c.Set("transfer.clients", "50");
  c.Set("transfer.samples_per_client", "8");
  c.Set("transfer.fraction", "0.16");
  c.Set("transfer.epochs", "30");
  c.Set("transfer.head_epochs", "30");
  c.Set("transfer.schemes", "FTL_c,FbFTL");
  const auto runs = RunSchemes(c, *source, train, test);
  EXPECT_GT(Find(runs, "FTL_c").accuracy, 0.9);
  EXPECT_GT(Find(runs, "FbFTL").accuracy, 0.9);
  // The whole one-shot FbFTL uplink is far below FTL_c's.
  EXPECT_LT(Find(runs, "FbFTL").uplink_bytes * 100, Find(runs, "FTL_c").uplink_bytes);
  // Refitting on every sample for the epochs the validation chose: a curve
  // of that many epochs, ending at the head that is kept.
  c.Set("transfer.schemes", "FbFTL");
  c.Set("transfer.refit", "true");
  c.Set("transfer.validation_share", "0.25");
  const SchemeRun refit = RunSchemes(c, *source, train, test)[0];
  EXPECT_GT(refit.accuracy, 0.9);
  ASSERT_FALSE(refit.curve.empty());
  EXPECT_LE(refit.curve.size(), 30u);
  EXPECT_EQ(refit.accuracy, refit.curve.back().test_accuracy);
}

TEST(TransferSchemesTest, LostPacketsAreRetransmittedThenDropped) {
  const Dataset train = Synthetic(800, 1), test = Synthetic(50, 2);
  Config c;
  c.Set("transfer.clients", "100");
  c.Set("transfer.samples_per_client", "8");
  c.Set("transfer.head_epochs", "1");
  c.Set("transfer.schemes", "FbFTL");
  c.Set("transfer.block_loss", "0.5");
  c.Set("transfer.retransmissions", "2");
  const SchemeRun r = RunSchemes(c, *Source(), train, test)[0];
  // Eq. 19: 1 + 0.5 + 0.25 transmissions per packet; 1/8 of packets lost.
  EXPECT_NEAR(static_cast<double>(r.transmissions) / r.upload_batches, 1.75, 0.08);
  EXPECT_NEAR(static_cast<double>(r.lost_uploads) / r.upload_batches, 0.125, 0.03);
}

TEST(TransferSchemesTest, NonFiniteUploadsAreSkippedNotTrainedOn) {
  const Dataset train = Synthetic(64, 1), test = Synthetic(50, 2);
  auto source = Source();
  {
    torch::NoGradGuard no_grad;
    source->StageParameters(0, 1)[0].fill_(std::nanf(""));  // the extractor emits NaN
  }
  Config c = Small();
  c.Set("transfer.schemes", "FTL_c,FbFTL");
  const auto runs = RunSchemes(c, *source, train, test);
  for (const SchemeRun& r : runs) {
    SCOPED_TRACE(r.scheme);
    EXPECT_EQ(r.rejected_uploads, r.upload_batches);
  }
}

TEST(TransferSchemesTest, TableMeasuresUplinkToTheLowerOfFtlcAndFbftlAccuracy) {
  auto run = [](const std::string& scheme, double accuracy, std::vector<CurvePoint> curve) {
    SchemeRun r;
    r.scheme = scheme;
    r.accuracy = accuracy;
    r.curve = std::move(curve);
    r.uplink_bytes = r.curve.empty() ? 1000 : r.curve.back().uplink_bytes;
    return r;
  };
  const std::vector<SchemeRun> runs = {
      run("FL", 0.7, {{1, 4000000, 0.5}, {2, 8000000, 0.7}}),
      run("FTL_c", 0.85, {{1, 3000000, 0.8}, {2, 6000000, 0.9}, {3, 9000000, 0.85}}),
      run("FbFTL", 0.88, {}),
  };
  const std::string table = SchemesMarkdown(runs);
  // FTL_c first reaches 0.85 (the lower of 0.85 and 0.88) after epoch 2:
  // 6e6 bytes, 6000 times FbFTL's 1000; over its run, 9000 times.
  EXPECT_NE(table.find("uplink to reach 0.8500 (bytes)"), std::string::npos) << table;
  EXPECT_NE(table.find("| 9000 | 6e+06 | 6000 |"), std::string::npos) << table;
  // FL never reaches it: more than its whole uplink.
  EXPECT_NE(table.find("| 8000 | > 8e+06 | > 8000 |"), std::string::npos) << table;
  EXPECT_NE(table.find("| 1 | 1000 | 1 |"), std::string::npos) << table;
  const std::string csv = SchemesCsv(runs);
  EXPECT_NE(csv.find(",6000000,0.850000\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(",-1,0.850000\n"), std::string::npos) << csv;
}

TEST(TransferSchemesTest, BadSetupsAreRefusedWithTheKey) {
  const Dataset train = Synthetic(64, 1), test = Synthetic(50, 2);
  auto expect_error = [&](const std::string& key, const std::string& value,
                          const std::string& text) {
    Config c = Small();
    c.Set(key, value);
    try {
      RunSchemes(c, *Source(), train, test);
      ADD_FAILURE() << key << "=" << value << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error("transfer.schemes", "FL,FedSGD", "unknown scheme 'FedSGD'");
  expect_error("transfer.cut", "fc9", "transfer.cut: no stage named 'fc9'");
  expect_error("transfer.clients", "100", "need 400, the training set has 64");
}

}  // namespace
}  // namespace fedprof
