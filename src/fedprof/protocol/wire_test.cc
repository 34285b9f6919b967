#include "fedprof/protocol/wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "federation.pb.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;
using testing_support::ExpectError;

// Every field away from its default, so a field the translation drops shows.
FitInstructions FullInstructions() {
  FitInstructions ins;
  ins.round = 17;
  ins.model_version = 16;
  ins.report.profile = true;
  ins.report.loss = true;
  ins.report.evaluate = true;
  ins.objective.prox_mu = 0.25;
  ins.objective.keep_local_batch_norm = true;
  ins.report.sketch_dim = 128;
  ins.report.public_key = std::make_shared<const std::string>(std::string("key\0bytes", 9));
  ins.report.secure_reference = std::make_shared<const std::string>("reference");
  ins.train.epochs = 3;
  ins.train.batch_size = 48;
  ins.train.lr = 0.037;
  ins.train.momentum = 0.5;
  ins.train.weight_decay = 1e-4;
  ins.seed = 0xfedcba9876543210ULL;
  ins.clip_norm = 0.375;
  DdgParams ddg;
  ddg.clip_norm = 0.375;
  ddg.noise_sd = 0.0625;
  ddg.granularity = 0x1p-20;
  ddg.bits = 24;
  ddg.rounding_beta = 0.5;
  ddg.dim = 10;  // TaskOf's default model size
  ddg.rotation_seed = 0xfedcba9876543210;
  ins.ddg = ddg;
  return ins;
}

FitResult FullResult() {
  FitResult r;
  r.client_id = 42;
  r.ok = true;
  r.timed_out = true;
  r.error = "disk full";
  r.params = {1.0f, 2.0f, 3.0f};
  r.num_samples = 1234;
  r.train_loss = 0.75;
  r.train_loss_rms = 0.875;
  r.within_clip = true;
  Profile p;
  p.version = 9;
  p.layer = "fc1";
  p.mean = {0.5, -1.25, 3.0};
  p.var = {1.0, 0.125, 2.5};
  r.profile = p;
  r.encrypted_divergence = std::string("\x01\x00\x02", 3);
  r.pre_train_loss = 2.5;
  r.sketch = {0.5f, -0.25f};
  r.cost = {1.5, 2.5, 0.25, 0.125};
  return r;
}

pb::TaskHeader TaskOf(const FitInstructions& ins, int64_t num_params = 10) {
  pb::TaskHeader h;
  ToWire(ins, /*task_id=*/7, num_params, &h);
  return h;
}

pb::ResultHeader ResultOf(const FitResult& r) {
  pb::ResultHeader h;
  ToWire(r, &h);
  return h;
}

// Through the bytes, as a peer would receive it.
template <typename Message>
Message Reparsed(const Message& m) {
  Message out;
  EXPECT_TRUE(out.ParseFromString(m.SerializeAsString()));
  return out;
}

TEST(WireTest, InstructionsRoundTripEveryField) {
  const FitInstructions sent = FullInstructions();
  const pb::TaskHeader header = Reparsed(TaskOf(sent, 12345));
  EXPECT_EQ(header.protocol_version(), kProtocolVersion);
  EXPECT_EQ(header.task_id(), 7);
  EXPECT_EQ(header.num_params(), 12345);
  const FitInstructions got = FromWire(header);
  EXPECT_EQ(got.round, sent.round);
  EXPECT_EQ(got.model_version, sent.model_version);
  EXPECT_EQ(got.report.profile, sent.report.profile);
  EXPECT_EQ(got.report.loss, sent.report.loss);
  EXPECT_EQ(got.report.evaluate, sent.report.evaluate);
  EXPECT_EQ(got.objective.prox_mu, sent.objective.prox_mu);
  EXPECT_EQ(got.objective.keep_local_batch_norm, sent.objective.keep_local_batch_norm);
  EXPECT_EQ(got.report.sketch_dim, sent.report.sketch_dim);
  ASSERT_TRUE(got.report.public_key && got.report.secure_reference);
  EXPECT_EQ(*got.report.public_key, *sent.report.public_key);
  EXPECT_EQ(*got.report.secure_reference, *sent.report.secure_reference);
  EXPECT_EQ(got.train.epochs, sent.train.epochs);
  EXPECT_EQ(got.train.batch_size, sent.train.batch_size);
  EXPECT_EQ(got.train.lr, sent.train.lr);
  EXPECT_EQ(got.train.momentum, sent.train.momentum);
  EXPECT_EQ(got.train.weight_decay, sent.train.weight_decay);
  EXPECT_EQ(got.seed, sent.seed);
  EXPECT_EQ(got.clip_norm, sent.clip_norm);
  ASSERT_TRUE(got.ddg.has_value());
  EXPECT_EQ(got.ddg->clip_norm, sent.clip_norm);
  EXPECT_EQ(got.ddg->noise_sd, sent.ddg->noise_sd);
  EXPECT_EQ(got.ddg->granularity, sent.ddg->granularity);
  EXPECT_EQ(got.ddg->bits, sent.ddg->bits);
  EXPECT_EQ(got.ddg->rounding_beta, sent.ddg->rounding_beta);
  EXPECT_EQ(got.ddg->dim, 12345u) << "the model's size, from the header";
  EXPECT_EQ(got.ddg->rotation_seed, sent.ddg->rotation_seed);
  EXPECT_EQ(got.global, nullptr) << "the model travels in chunks";

  // Without secure matching neither key nor reference appears.
  FitInstructions plain = sent;
  plain.report.public_key.reset();
  plain.report.secure_reference.reset();
  const FitInstructions got_plain = FromWire(Reparsed(TaskOf(plain)));
  EXPECT_EQ(got_plain.report.public_key, nullptr);
  EXPECT_EQ(got_plain.report.secure_reference, nullptr);
}

TEST(WireTest, ResultRoundTripsEveryFieldButTheModel) {
  const FitResult sent = FullResult();
  const pb::ResultHeader header = Reparsed(ResultOf(sent));
  EXPECT_EQ(header.protocol_version(), kProtocolVersion);
  EXPECT_EQ(header.num_params(), 3) << "announces the values that follow";
  const FitResult got = FromWire(header);
  EXPECT_EQ(got.client_id, sent.client_id);
  EXPECT_EQ(got.ok, sent.ok);
  EXPECT_EQ(got.timed_out, sent.timed_out);
  EXPECT_EQ(got.error, sent.error);
  EXPECT_TRUE(got.params.empty()) << "the model travels in chunks";
  EXPECT_EQ(got.num_samples, sent.num_samples);
  EXPECT_EQ(got.train_loss, sent.train_loss);
  EXPECT_EQ(got.train_loss_rms, sent.train_loss_rms);
  EXPECT_EQ(got.within_clip, sent.within_clip);
  ASSERT_TRUE(got.profile.has_value());
  EXPECT_EQ(got.profile->version, sent.profile->version);
  EXPECT_EQ(got.profile->layer, sent.profile->layer);
  EXPECT_EQ(got.profile->mean, sent.profile->mean);
  EXPECT_EQ(got.profile->var, sent.profile->var);
  EXPECT_EQ(got.encrypted_divergence, sent.encrypted_divergence);
  EXPECT_EQ(got.pre_train_loss, sent.pre_train_loss);
  EXPECT_EQ(got.sketch, sent.sketch);
  EXPECT_EQ(got.cost.time_s, sent.cost.time_s);
  EXPECT_EQ(got.cost.energy_j, sent.cost.energy_j);
  EXPECT_EQ(got.cost.profiling_time_s, sent.cost.profiling_time_s);
  EXPECT_EQ(got.cost.profiling_energy_j, sent.cost.profiling_energy_j);

  FitResult report = sent;  // no profile asked for: none arrives
  report.profile.reset();
  EXPECT_FALSE(FromWire(Reparsed(ResultOf(report))).profile.has_value());
}

// A client's error stays one line of bounded length whatever it sent.
TEST(WireTest, ResultErrorIsBoundedAndOneLine) {
  FitResult r = FullResult();
  r.error = std::string(3 * kMaxErrorLength, 'x');
  const pb::ResultHeader header = ResultOf(r);
  EXPECT_EQ(header.error().size(), kMaxErrorLength) << "the sender cuts it";
  EXPECT_NO_THROW(FromWire(header));

  pb::ResultHeader forged = header;
  forged.set_error("first line\nsecond line\x1b[2J");
  const std::string error = FromWire(forged).error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_EQ(error.find('\x1b'), std::string::npos) << error;
  EXPECT_NE(error.find("first line"), std::string::npos) << error;
}

TEST(WireTest, MalformedTaskHeadersAreRefused) {
  const pb::TaskHeader good = TaskOf(FullInstructions());
  ASSERT_NO_THROW(FromWire(good));
  pb::TaskHeader h = good;
  h.set_protocol_version(kProtocolVersion + 1);
  ExpectError([&] { FromWire(h); }, {"protocol version " + std::to_string(kProtocolVersion + 1),
                                     "this side version " + std::to_string(kProtocolVersion)});
  h = good;
  h.set_num_params(-1);
  ExpectError([&] { FromWire(h); }, "model of -1 values");
  h.set_num_params(static_cast<int64_t>(kMaxModelValues) + 1);
  ExpectError([&] { FromWire(h); }, {"model of 2147483649 values", "0..2147483648"});
  h.set_num_params(static_cast<int64_t>(kMaxModelValues));
  EXPECT_NO_THROW(FromWire(h)) << "the bound itself is allowed";
  h = good;
  h.set_sketch_dim(-1);
  ExpectError([&] { FromWire(h); }, "sketch size -1");
  h.set_sketch_dim(static_cast<int32_t>(kMaxSketchDim) + 1);
  ExpectError([&] { FromWire(h); }, "sketch size");
  h = good;
  h.mutable_train()->set_epochs(-1);
  ExpectError([&] { FromWire(h); }, "-1 epochs");
  h = good;
  h.mutable_train()->set_batch_size(0);
  ExpectError([&] { FromWire(h); }, "batch 0");
  h = good;
  h.clear_secure_reference();
  ExpectError([&] { FromWire(h); }, "public key without an encrypted reference");
  h = good;
  h.clear_public_key();
  ExpectError([&] { FromWire(h); }, "public key without an encrypted reference");
  for (double bad : {-1.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    h = good;
    h.set_clip_norm(bad);
    ExpectError([&] { FromWire(h); }, "clip norm");
  }
  h = good;
  h.mutable_distributed_dp()->set_bits(63);
  ExpectError([&] { FromWire(h); }, {"task: distributed DP: bits", "not 63"});
  h = good;
  h.mutable_distributed_dp()->set_noise_sd(NAN);
  ExpectError([&] { FromWire(h); }, "noise sd");
  h = good;
  h.mutable_distributed_dp()->set_granularity(0);
  ExpectError([&] { FromWire(h); }, "granularity");
  h = good;
  h.set_clip_norm(0);
  ExpectError([&] { FromWire(h); }, "distributed DP: clip norm");
}

TEST(WireTest, MalformedResultHeadersAreRefused) {
  const pb::ResultHeader good = ResultOf(FullResult());
  ASSERT_NO_THROW(FromWire(good));
  pb::ResultHeader h = good;
  h.set_protocol_version(0);
  ExpectError([&] { FromWire(h); }, "the client speaks protocol version 0");
  h = good;
  h.set_num_params(-5);
  ExpectError([&] { FromWire(h); }, {"result", "model of -5 values"});
  h.set_num_params(static_cast<int64_t>(kMaxModelValues) + 1);
  ExpectError([&] { FromWire(h); }, {"result", "model of 2147483649 values"});
  h = good;
  h.mutable_sketch()->Resize(static_cast<int>(kMaxSketchDim) + 1, 0.0f);
  ExpectError([&] { FromWire(h); }, "sketch too large");
  h = good;
  h.set_error(std::string(kMaxErrorLength + 1, 'e'));
  ExpectError([&] { FromWire(h); }, "error message too long");
  h.set_error(std::string(kMaxErrorLength, 'e'));
  EXPECT_NO_THROW(FromWire(h));
  h = good;
  h.set_encrypted_divergence(std::string(kMaxCiphertextBytes + 1, '\0'));
  ExpectError([&] { FromWire(h); }, {"encrypted divergence of 4097 bytes"});
  h = good;
  h.mutable_profile()->set_layer(std::string(kMaxLayerNameLength + 1, 'l'));
  ExpectError([&] { FromWire(h); }, {"profile layer name of 257 bytes", "over 256"});
  h.mutable_profile()->set_layer(std::string(kMaxLayerNameLength, 'l'));
  EXPECT_NO_THROW(FromWire(h));
  h = good;
  h.mutable_profile()->add_mean(1.0);
  ExpectError([&] { FromWire(h); }, "profile with 4 means and 3 variances");
  h = good;
  h.mutable_profile()->add_var(1.0);
  ExpectError([&] { FromWire(h); }, "profile with 3 means and 4 variances");
  h = good;
  h.mutable_profile()->mutable_mean()->Resize(static_cast<int>(kMaxProfileUnits) + 1, 0.0);
  h.mutable_profile()->mutable_var()->Resize(static_cast<int>(kMaxProfileUnits) + 1, 1.0);
  ExpectError([&] { FromWire(h); }, "profile with 1048577 means");
}

// Values that arithmetic would not keep: the wire copies bits.
FlatParams AwkwardFloats() {
  return {0.0f, -0.0f, 1.0f, -3.5f, std::numeric_limits<float>::denorm_min(),
          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN(), 1e-30f, 123456.789f, -7.0f};
}

bool SameBits(const FlatParams& a, const FlatParams& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(WireTest, FloatChunksRoundTripBitForBit) {
  const FlatParams params = AwkwardFloats();
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{4}, params.size()}) {
    FlatParams received;
    std::string bytes;
    for (size_t begin = 0; begin < params.size(); begin += chunk) {
      const size_t count = std::min(chunk, params.size() - begin);
      PutFloats(params, begin, count, &bytes);
      ASSERT_EQ(bytes.size(), count * sizeof(float));
      AppendFloats(bytes, params.size(), &received);
    }
    EXPECT_TRUE(SameBits(received, params)) << "chunks of " << chunk;
  }
  // An empty chunk adds nothing, even at the announced count.
  FlatParams full = params;
  AppendFloats("", params.size(), &full);
  EXPECT_TRUE(SameBits(full, params));
}

TEST(WireTest, FloatChunksThatDoNotFitAreRefused) {
  const FlatParams params = AwkwardFloats();
  std::string bytes;
  PutFloats(params, 0, 4, &bytes);
  FlatParams received = {9.0f};
  ExpectError([&] { AppendFloats(bytes.substr(0, 15), 100, &received); },
              {"model chunk of 15 bytes", "not whole float32s"});
  ExpectError([&] { AppendFloats(bytes, 4, &received); },
              {"model chunks exceed the 4 values announced"});
  EXPECT_EQ(received, FlatParams{9.0f}) << "a refused chunk adds nothing";
  AppendFloats(bytes, 5, &received);  // exactly up to the count
  EXPECT_EQ(received.size(), 5u);
  ExpectError([&] { AppendFloats(std::string(4, '\0'), 5, &received); }, "exceed the 5 values");
}

// The feature scaling a server sends round-trips; one no training file could
// give (lengths that differ, a NaN mean, an SD of 0, a name twice or with a
// control character, too many columns) is refused, saying why.
TEST(WireTest, FeatureScalingRoundTripsAndImpossibleOnesAreRefused) {
  const FeatureScaling good{{"age", "income", "température"}, {41.5F, 52000.0F, 11.25F}, {12.0F, 9000.5F, 1e-12F}};
  pb::FeatureScaling wire;
  ToWire(good, &wire);
  EXPECT_TRUE(FromWire(wire) == good);
  EXPECT_TRUE(FromWire(pb::FeatureScaling()).empty());  // images: none
  const auto refused = [&](const std::function<void(pb::FeatureScaling&)>& change, const std::string& why) {
    pb::FeatureScaling bad = wire;
    change(bad);
    ExpectError([&] { FromWire(bad); }, {"feature scaling", why});
  };
  refused([](pb::FeatureScaling& w) { w.add_mean(1); }, "3 names, 4 means and 3 standard deviations");
  refused([](pb::FeatureScaling& w) { w.set_mean(1, std::nanf("")); }, "column 2 has mean");
  refused([](pb::FeatureScaling& w) { w.set_sd(0, 0); }, "column 1 has mean");
  refused([](pb::FeatureScaling& w) { w.set_sd(2, -1); }, "column 3 has mean");
  refused([](pb::FeatureScaling& w) { w.set_names(2, "age"); }, "column 3's name is given twice");
  refused([](pb::FeatureScaling& w) { w.set_names(1, "in\x1b[2Jcome"); }, "column 2's name is not");
  refused([](pb::FeatureScaling& w) { w.set_names(0, ""); }, "column 1's name is not");
  refused(
      [](pb::FeatureScaling& w) {
        for (size_t k = 0; k < kMaxFeatures; ++k) w.add_names("c" + std::to_string(k));
      },
      "over 10000");
}

}  // namespace
}  // namespace fedprof
