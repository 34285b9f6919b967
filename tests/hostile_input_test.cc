// Regression tests for the hostile inputs that crashed, invoked undefined
// behaviour or gave a wrong result before they were fixed. Each replays the
// input (also kept in the fuzz target's corpus, fuzz/corpus/<target>/regress-*,
// which the sanitizer build replays too) and checks for the clear error or
// the right result.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "federation.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/data/loaders.h"
#include "fedprof/fbftl/compression.h"
#include "fedprof/privacy/paillier.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/protocol/wire.h"
#include "transfer.pb.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

std::string Corpus(const std::string& target, const std::string& name) {
  return ReadFile(std::string(FEDPROF_SOURCE_DIR) + "/fuzz/corpus/" + target + "/" + name);
}

// fuzz_transfer: a kept count of 2^64 - 1 wrapped to -1 as int64, passed
// the "kept <= length" check and the packed-size check ((-10 + 7) / 8 == 0
// bytes), then sized a vector of 2^64 - 1 indices: std::length_error.
TEST(HostileInputTest, TransferKeptCountBeyondTheLengthIsRefused) {
  wire::Values v;
  v.set_length(4);
  v.set_bits(8);
  v.set_kept(std::numeric_limits<uint64_t>::max());
  v.set_index_bits(2);
  ExpectError([&] { DecodeValues(v, 256, "upload"); }, "keeps 18446744073709551615 of 4");
  const std::string input = Corpus("fuzz_transfer", "regress-kept-wraps");
  wire::Values replay;
  ASSERT_TRUE(replay.ParseFromString(input.substr(1)));
  EXPECT_THROW(DecodeValues(replay, 256, "upload"), Error);
}

// fuzz_transfer: a quantiser range with a NaN or infinite end decoded every
// value to NaN; a range with low > high decoded values outside it.
TEST(HostileInputTest, TransferNonFiniteQuantiserRangeIsRefused) {
  wire::Values v;
  v.set_length(2);
  v.set_bits(4);
  v.set_kept(2);
  v.set_low(-std::numeric_limits<float>::infinity());
  v.set_high(1);
  v.set_packed(std::string(1, '\x21'));
  ExpectError([&] { DecodeValues(v, 2, "upload"); }, "expected finite low <= high");
  v.set_low(std::numeric_limits<float>::quiet_NaN());
  EXPECT_THROW(DecodeValues(v, 2, "upload"), Error);
  v.set_low(2);
  EXPECT_THROW(DecodeValues(v, 2, "upload"), Error);
  v.set_low(-1);
  EXPECT_EQ(DecodeValues(v, 2, "upload").size(), 2u);
}

// fuzz_transfer (the seed of a gradient upload without smashed data): an
// empty Values message was decoded with memcpy(nullptr, ..., 0) (UBSan:
// nonnull-attribute); encoding an empty vector did the same.
TEST(HostileInputTest, EmptyValuesDecodeToAnEmptyVector) {
  EXPECT_TRUE(DecodeValues(wire::Values(), 256, "smashed data").empty());
  wire::Values out;
  EncodeValues({}, Compression{}, &out);
  EXPECT_EQ(out.length(), 0u);
  EXPECT_TRUE(DecodeValues(out, 0, "empty").empty());
  const std::string input = Corpus("fuzz_transfer", "regress-empty-dense");
  wire::GradientUpload up;
  ASSERT_TRUE(up.ParseFromString(input.substr(1)));
  EXPECT_TRUE(DecodeValues(up.smashed(), 256, "smashed data").empty());
  EXPECT_EQ(DecodeValues(up.gradient(), 256, "gradient").size(), 3u);
  EXPECT_TRUE(DecodeFloats("").empty());
}

// fuzz_transfer (make fuzz): with low = -4096 and high = 8.8e-12, the top
// code decoded to low + 3 · step, which rounding put above high: a value
// outside the range the message declares.
TEST(HostileInputTest, QuantisedValuesStayWithinTheirRange) {
  const std::string input = Corpus("fuzz_transfer", "regress-above-high");
  wire::FeatureUpload up;
  ASSERT_TRUE(up.ParseFromString(input.substr(1)));
  const wire::Values& v = up.features();
  ASSERT_GT(v.high(), 0);
  ASSERT_LT(v.high(), 1e-10);
  for (float x : DecodeValues(v, 64, "feature upload")) {
    EXPECT_GE(x, v.low());
    EXPECT_LE(x, v.high());
  }
  // The top code is exactly high, the bottom code exactly low.
  wire::Values w;
  w.set_length(2);
  w.set_bits(2);
  w.set_kept(2);
  w.set_low(-4096);
  w.set_high(8.76e-12f);
  w.set_packed(std::string(1, static_cast<char>(0b0011)));  // codes 3, 0
  EXPECT_EQ(DecodeValues(w, 2, "test"), (std::vector<float>{8.76e-12f, -4096}));
}

// fuzz_csv: a finite double beyond float32 (1e39) became an infinite
// feature or regression target.
TEST(HostileInputTest, CsvValueBeyondFloat32IsRefused) {
  CsvOptions regression;
  regression.targets = {"y"};
  ExpectError(
      [&] {
        ParseCsv({"t.csv", "x,y\n1e39,1\n"}, regression);
      },
      "t.csv: line 2, column 1 (\"x\"): 1e39 is beyond the float32 range");
  ExpectError([&] { ParseCsv({"t.csv", "x,y\n1,-4e38\n"}, regression); }, "float32 range");
  EXPECT_EQ(ParseCsv({"t.csv", "x,y\n3.4e38,1\n"}, regression).x.item<float>(), 3.4e38f);
}

// fuzz_profile_json: "version": 1e300 was converted to int64 with undefined
// behaviour (UBSan: float-cast-overflow).
TEST(HostileInputTest, ProfileVersionMustBeAnInteger) {
  ExpectError(
      [] { ProfileFromJson(R"({"version":1e300,"layer":"","mean":[0],"var":[1]})", "p.json"); },
      "p.json: not a profile: \"version\" must be an integer");
  EXPECT_THROW(ProfileFromJson(R"({"version":18446744073709551615,"layer":"","mean":[],"var":[]})",
                               "p.json"),
               Error);
  EXPECT_EQ(ProfileFromJson(R"({"version":-3,"layer":"a","mean":[0],"var":[1]})", "p.json").version,
            -3);
}

// fuzz_profile_json: two valid profiles whose values approach the double
// range gave a NaN divergence (inf / inf), and a NaN score, which the
// score-weighted sampling cannot use.
TEST(HostileInputTest, ExtremeProfilesNeverGiveANanDivergence) {
  const double big = std::numeric_limits<double>::max();
  EXPECT_FALSE(std::isnan(GaussianKl(1e200, 1, -1e200, 1e308)));
  EXPECT_FALSE(std::isnan(GaussianKl(big, big, -big, big)));
  EXPECT_EQ(GaussianKl(big, 1, -big, 1), std::numeric_limits<double>::infinity());
  Profile p;
  p.mean = {1e200};
  p.var = {1e308};
  Profile r = p;
  r.mean = {-1e200};
  ASSERT_EQ(CheckProfile(p, r), "");
  const double div = Divergence(p, r);
  EXPECT_FALSE(std::isnan(div));
  EXPECT_GE(Score(div, 10), 0.0);
  // Ordinary values are computed as before, bit for bit.
  EXPECT_EQ(GaussianKl(0.5, 2, 0.25, 1),
            0.5 * std::log(1 / 2.0) + (2 - 1.0) / (2 * 1.0) + 0.0625 / 2);
}

std::string SumBytes(int64_t count, int64_t weight, const std::vector<__int128>& sums) {
  std::string out(16 + 16 * sums.size(), '\0');
  std::memcpy(&out[0], &count, 8);
  std::memcpy(&out[8], &weight, 8);
  if (!sums.empty()) std::memcpy(&out[16], sums.data(), 16 * sums.size());
  return out;
}

// fuzz_model_sum: a rank's sum with a weight near 2^63 overflowed __int128
// in Centered(i, 1) (UBSan: float-cast-overflow), and sums near 2^127
// overflowed when merged (signed-integer-overflow).
TEST(HostileInputTest, ModelSumOutsideWhatAddCanMakeIsRefused) {
  ExpectError([] { ModelSum::Parse(SumBytes(1, int64_t{1} << 62, {0}), "rank 1"); },
              "rank 1: model sum of 1 models of weight 4611686018427387904");
  ExpectError([] { ModelSum::Parse(SumBytes(2, 1, {0}), "rank 1"); }, "models of weight");
  const __int128 huge = static_cast<__int128>(1) << 120;
  ExpectError(
      [] {
        ModelSum::Parse(SumBytes(1, 5, {0, huge}), "rank 1");
      },
      "model sum value 1 is beyond");
  const std::string replay = Corpus("fuzz_model_sum", "regress-weight-overflow");
  EXPECT_THROW(ModelSum::Parse(replay, "rank 1"), Error);
  // The largest sum Add can make still parses, merges and centres.
  const __int128 top = static_cast<__int128>(1) << 104;
  ModelSum s = ModelSum::Parse(SumBytes(1, kMaxModelSumWeight, {top, -top}), "rank 1");
  s.Merge(s);
  EXPECT_EQ(s.Centered(0, 0.0f), 0x1p41);
  EXPECT_TRUE(std::isfinite(s.Centered(1, 1e30f)));
}

// Merging past kMaxModelSumTerms terms is refused instead of overflowing.
TEST(HostileInputTest, ModelSumMergeBeyondTheTermLimitIsRefused) {
  const ModelSum full = ModelSum::Parse(SumBytes(kMaxModelSumTerms, kMaxModelSumTerms, {0}), "a");
  ModelSum s = full;
  ExpectError([&] { s.Merge(full); }, "more than 4194304");
  EXPECT_EQ(s.count(), kMaxModelSumTerms);
}

// A client (or a hostile server) pushes the global model towards 2^40:
// weight · base then exceeds the fixed-point range of Centered.
TEST(HostileInputTest, ModelSumCentredOnAHugeGlobalModelStaysDefined) {
  ModelSum s;
  s.Reset(1);
  s.Add({1.0f}, kMaxModelSumWeight);
  s.Add({0.0f}, kMaxModelSumWeight);
  const double centred = s.Centered(0, 0x1p39f);
  EXPECT_DOUBLE_EQ(centred, static_cast<double>(kMaxModelSumWeight) * (1 - 2 * 0x1p39));
}

// fuzz_wire: the model a server announces in its Register reply was built
// as sent: a hidden layer of 2^40 units or a sample shape of 2^62 values
// ended in bad_alloc or a LibTorch exception, not a clear error.
TEST(HostileInputTest, RegisterReplyModelSpecIsChecked) {
  federation::v1::ModelSpec m;
  m.set_name("mlp");
  m.add_input_shape(784);
  m.set_outputs(10);
  m.add_hidden(64);
  m.set_width(1.0);
  EXPECT_EQ(FromWire(m).hidden, std::vector<int64_t>{64});
  federation::v1::ModelSpec bad = m;
  bad.set_hidden(0, int64_t{1} << 40);
  ExpectError([&] { FromWire(bad); }, "hidden layer of 1099511627776 units");
  bad = m;
  bad.clear_input_shape();
  for (int i = 0; i < 3; ++i) bad.add_input_shape(int64_t{1} << 20);
  ExpectError([&] { FromWire(bad); }, "sample shape");
  bad = m;
  bad.set_name("gpt");
  ExpectError([&] { FromWire(bad); }, "model 'gpt' is not one of");
  bad = m;
  bad.set_outputs(-1);
  ExpectError([&] { FromWire(bad); }, "-1 outputs");
  bad = m;
  bad.set_width(std::nan(""));
  ExpectError([&] { FromWire(bad); }, "width");
}

// fuzz_wire, fuzz_paillier, fuzz_config: errors echoed the input they
// refused as is, so a model name, a number or a config key with a line
// break split the one-line error; a client's error text could write lines
// into the server's log.
TEST(HostileInputTest, EchoedInputKeepsErrorsOnOneLine) {
  federation::v1::ModelSpec spec;
  ASSERT_TRUE(spec.ParseFromString(Corpus("fuzz_wire", "regress-multiline-name").substr(1)));
  ExpectError([&] { FromWire(spec); }, "is not one of");
  ExpectError([] { BigInt::FromDecimal("12\n34"); }, "'12\\x0a34' is not a decimal integer");
  const std::string decimal = Corpus("fuzz_paillier", "regress-multiline-decimal");
  ExpectError([&] { BigInt::FromDecimal(decimal.substr(1)); }, "is not a decimal integer");
  Config config;
  ExpectError([&] { config.Set("data.name", "mnist\nx"); }, "control character at byte 5");
  ExpectError([&] { config.Set("data.dir", "a\x01b"); }, "control character");
  ExpectError([&] { config.Set("data.dir", "\xff"); }, "invalid UTF-8 at byte 0");
  ExpectError([&] { config.MergeTomlString("\"a\\nb\" = 1", "t.toml"); }, "is unknown");
  ExpectError([&] { config.SetAssignment("seed=1\n2"); }, "is not a number");
  config.Set("data.dir", "caf\xc3\xa9\tdir");  // UTF-8 and a tab are text
  federation::v1::ResultHeader h;
  h.set_protocol_version(kProtocolVersion);
  h.set_error("out of memory\nround 3: client 0 refused: forged");
  EXPECT_EQ(FromWire(h).error, "out of memory\\x0around 3: client 0 refused: forged");
}

// fuzz_config: -0 was kept as "-0", which config.toml wrote as the TOML
// integer -0 and read back as 0: the resumed config differed from the run's
// (and so would its fingerprint).
TEST(HostileInputTest, NegativeZeroRoundTripsThroughConfigToml) {
  Config config;
  config.MergeTomlString("[fedprof]\nalpha = -0.0\n", "t.toml");
  Config again;
  again.MergeTomlString(config.ToToml(), "config.toml");
  EXPECT_TRUE(again == config);
  EXPECT_EQ(again.Fingerprint(), config.Fingerprint());
}

}  // namespace
}  // namespace fedprof
