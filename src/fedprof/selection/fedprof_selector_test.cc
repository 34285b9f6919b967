#include "fedprof/selection/fedprof_selector.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/privacy/secure_matching.h"

namespace fedprof {
namespace {

// Reference profiles that move with the model version: mean = version.
Profile ReferenceOf(int64_t version) {
  Profile p;
  p.version = version;
  p.layer = "fc1";
  p.mean = {static_cast<double>(version), 0.0};
  p.var = {1.0, 1.0};
  return p;
}

FitResult WithProfile(int id, int64_t version, double mean0) {
  FitResult r;
  r.client_id = id;
  r.ok = true;
  Profile p = ReferenceOf(version);
  p.mean[0] = mean0;
  r.profile = p;
  return r;
}

std::unique_ptr<FedProfSelector> Make(double alpha, int n) {
  FedProfOptions o;
  o.alpha = alpha;
  return std::make_unique<FedProfSelector>(o, n, [](const FlatParams&, int64_t v) {
    return ReferenceOf(v);
  });
}

TEST(FedProfStrategyTest, ScoresAreVersionAligned) {
  auto s = Make(2.0, 3);
  s->OnGlobalModel({}, 0);
  // Clients 0 and 1 profiled under version 0; client 0 matches RP_V(0).
  const FitResult a = WithProfile(0, 0, 0.0), b = WithProfile(1, 0, 1.0);
  s->Observe(a);
  s->Observe(b);
  s->OnGlobalModel({}, 1);
  s->OnGlobalModel({}, 2);
  // Client 2 profiled under version 2, one unit of mean away from RP_V(2).
  const FitResult c = WithProfile(2, 2, 3.0);
  EXPECT_EQ(s->CheckResult(c), "");
  s->Observe(c);
  const std::vector<double> scores = s->ComputeScores();
  // Client 0 is compared with RP_V(0) (KL 0), not with RP_V(2) (KL 2).
  EXPECT_DOUBLE_EQ(scores[0], 1.0);
  // div = mean over 2 units of KL = (0.5 + 0) / 2.
  EXPECT_DOUBLE_EQ(scores[1], std::exp(-2.0 * 0.25));
  EXPECT_DOUBLE_EQ(scores[2], std::exp(-2.0 * 0.25));
}

TEST(FedProfStrategyTest, ClientsWithoutProfilesScoreZeroAndAlphaZeroIsUniform) {
  auto s = Make(0.0, 3);
  s->OnGlobalModel({}, 0);
  const FitResult a = WithProfile(0, 0, 50.0);  // far off, but alpha = 0
  s->Observe(a);
  const std::vector<double> scores = s->ComputeScores();
  EXPECT_EQ(scores, (std::vector<double>{1.0, 0.0, 0.0}));
}

TEST(FedProfStrategyTest, MalformedOrMisversionedProfilesAreRefused) {
  auto s = Make(10, 2);
  s->OnGlobalModel({}, 0);
  s->OnGlobalModel({}, 1);
  FitResult r = WithProfile(0, 1, 0.0);
  r.profile->var[1] = 0;
  EXPECT_NE(s->CheckResult(r).find("variance <= 0"), std::string::npos);
  r = WithProfile(0, 7, 0.0);
  EXPECT_NE(s->CheckResult(r).find("does not hold"), std::string::npos);
  // An asynchronous client's profile of an earlier model is matched with
  // that model's reference (the server checks it is the version it sent).
  r = WithProfile(0, 0, 0.0);
  EXPECT_EQ(s->CheckResult(r), "");
  r.profile.reset();
  EXPECT_EQ(s->CheckResult(r), "no profile sent");
}

TEST(FedProfStrategyTest, SelectionFavoursHighScores) {
  auto s = Make(10, 10);
  s->OnGlobalModel({}, 0);
  std::vector<FitResult> results;
  for (int k = 0; k < 10; ++k) results.push_back(WithProfile(k, 0, k < 5 ? 0.0 : 2.0));
  for (const auto& r : results) s->Observe(r);
  std::vector<ClientInfo> infos(10);
  for (int k = 0; k < 10; ++k) infos[k].id = k;
  int good = 0, bad = 0;
  for (int t = 0; t < 200; ++t) {
    Rng rng = MakeRng(1, Stream::kSelection, {static_cast<uint64_t>(t)});
    for (int id : s->Select({t, 3, &infos}, rng)) (id < 5 ? good : bad)++;
  }
  EXPECT_EQ(good + bad, 600);
  EXPECT_LT(bad, good / 50);  // exp(-10) odds per draw
}

TEST(FedProfStrategyTest, StateRoundTrips) {
  auto s = Make(3, 3);
  s->OnGlobalModel({}, 0);
  const FitResult a = WithProfile(0, 0, 0.25), c = WithProfile(2, 0, -1.0 / 3);
  s->Observe(a);
  s->Observe(c);
  s->OnGlobalModel({}, 1);
  auto t = Make(3, 3);
  t->LoadState(s->SaveState());
  EXPECT_EQ(t->ComputeScores(), s->ComputeScores());
  EXPECT_EQ(t->SaveState(), s->SaveState());
  EXPECT_TRUE(t->HasReport(0));
  EXPECT_FALSE(t->HasReport(1));
  EXPECT_THROW(Make(3, 4)->LoadState(s->SaveState()), Error);
  EXPECT_THROW(t->LoadState("{not json"), Error);
}

TEST(FedProfStrategyTest, SelectsOnlyAmongAvailableClients) {
  auto s = Make(1, 6);
  s->OnGlobalModel({}, 0);
  for (int k = 0; k < 6; ++k) s->Observe(WithProfile(k, 0, 0.0));
  std::vector<ClientInfo> available = {{1, 10, -1}, {4, 10, -1}, {5, 10, -1}};
  Rng rng = MakeRng(1, Stream::kSelection);
  const std::vector<int> ids = s->Select({1, 2, &available}, rng);
  ASSERT_EQ(ids.size(), 2u);
  for (int id : ids) EXPECT_TRUE(id == 1 || id == 4 || id == 5) << id;
  EXPECT_EQ(s->LastScores().size(), 6u) << "scores stay indexed by client id";
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

// Secure matching end to end inside the selector: the instructions carry the
// key and the encrypted reference of the current version, the client's
// ciphertext decrypts to the plain divergence, and plain profiles are
// refused.
TEST(FedProfStrategyTest, SecureMatchingRecoversThePlainDivergence) {
  FedProfOptions o;
  o.alpha = 2;
  o.secure_key_bits = 2048;
  FedProfSelector s(o, 2, [](const FlatParams&, int64_t v) { return ReferenceOf(v); });
  s.OnGlobalModel({}, 0);
  ReportRequest ins;
  s.ConfigureReport(1, &ins);
  ASSERT_TRUE(ins.public_key && ins.secure_reference);
  FitResult r = WithProfile(1, 0, 1.0);
  const Profile profile = *r.profile;
  EXPECT_NE(s.CheckResult(r).find("in the clear"), std::string::npos);
  const PaillierPublicKey key = PaillierPublicKey::Parse(*ins.public_key);
  r.encrypted_divergence =
      EncryptedDivergence(key, SecureReference::Parse(*ins.secure_reference, key), profile);
  r.profile.reset();
  ASSERT_EQ(s.CheckResult(r), "");
  s.Observe(r);
  const double plain = Divergence(profile, ReferenceOf(0));
  EXPECT_NEAR(s.ComputeScores()[1], std::exp(-2 * plain), 1e-12);
  r.encrypted_divergence = std::string(r.encrypted_divergence.size(), '\0');
  EXPECT_NE(s.CheckResult(r).find("encrypted divergence refused"), std::string::npos);
  // A new version, a new encrypted reference.
  s.OnGlobalModel({}, 1);
  ReportRequest next;
  s.ConfigureReport(1, &next);
  EXPECT_NE(*next.secure_reference, *ins.secure_reference);
  EXPECT_EQ(*next.public_key, *ins.public_key);
}

}  // namespace
}  // namespace fedprof
