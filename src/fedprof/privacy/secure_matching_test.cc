#include "fedprof/privacy/secure_matching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "fedprof/core/error.h"
#include "fedprof/profiling/profile.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

// Means uniform in [−50, 50], variances log-uniform in [kVarianceFloor, 1e4].
Profile RandomProfile(std::mt19937_64& rng, size_t units, int64_t version = 3) {
  std::uniform_real_distribution<double> mean(-50, 50),
      log_var(std::log(kVarianceFloor), std::log(1e4));
  Profile p;
  p.version = version;
  p.layer = "fc1";
  for (size_t i = 0; i < units; ++i) {
    p.mean.push_back(mean(rng));
    p.var.push_back(std::exp(log_var(rng)));
  }
  return p;
}

// `base` with every mean and variance moved by a relative `step`: close to
// the reference, where the terms of the rearranged KL cancel the most.
Profile Perturbed(std::mt19937_64& rng, const Profile& base, double step) {
  std::uniform_real_distribution<double> u(-step, step);
  Profile p = base;
  for (size_t i = 0; i < p.units(); ++i) {
    p.mean[i] *= 1 + u(rng);
    p.var[i] *= 1 + u(rng);
  }
  return p;
}

// A 1024-bit key (the smallest accepted: accuracy does not depend on the key
// size, speed does) for the many-profile sweep, a 2048-bit one for the rest.
class SecureMatchingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    small_ = new PaillierSecretKey(PaillierSecretKey::Generate(1024));
    key_ = new PaillierSecretKey(PaillierSecretKey::Generate(2048));
  }
  static void TearDownTestSuite() {
    delete small_;
    delete key_;
  }
  static PaillierSecretKey* small_;
  static PaillierSecretKey* key_;
};

PaillierSecretKey* SecureMatchingTest::small_ = nullptr;
PaillierSecretKey* SecureMatchingTest::key_ = nullptr;

double SecureDivergence(const PaillierSecretKey& key, const Profile& client,
                        const Profile& reference) {
  // Through the wire formats, as deployed.
  const SecureReference sent =
      SecureReference::Parse(EncryptReference(key, reference).Serialize(),
                             PaillierPublicKey::Parse(key.public_key().Serialize()));
  return DecryptDivergence(key, EncryptedDivergence(key.public_key(), sent, client),
                           reference.units());
}

// Eq. 9 with the KL of Eq. 10 written as ½(x − log(1 + x)) + d²/(2σ_V²),
// x = (σ_k² − σ_V²)/σ_V², in long double: accurate where the plain double
// formula loses ~1e-16 absolute to cancellation (profiles within 1e-6 of
// each other, divergences ~1e-12).
double AccurateDivergence(const Profile& client, const Profile& reference) {
  long double sum = 0;
  for (size_t i = 0; i < client.units(); ++i) {
    const long double vv = reference.var[i];
    const long double x = (client.var[i] - vv) / vv;
    const long double d = static_cast<long double>(client.mean[i]) - reference.mean[i];
    sum += 0.5L * (x - std::log1p(x)) + d * d / (2 * vv);
  }
  return static_cast<double>(sum / client.units());
}

TEST_F(SecureMatchingTest, MatchesPlaintextDivergenceOnRandomProfiles) {
  std::mt19937_64 rng(2024);
  double worst_plain = 0, worst_accurate = 0;
  int compared = 0;
  // q from 1 to 512; several clients per reference keeps the sweep fast.
  for (size_t q : {1, 2, 5, 17, 64, 130, 512}) {
    const Profile reference = RandomProfile(rng, q);
    const SecureReference sent = SecureReference::Parse(
        EncryptReference(*small_, reference).Serialize(), small_->public_key());
    const Profile clients[] = {RandomProfile(rng, q), RandomProfile(rng, q),
                               Perturbed(rng, reference, 1e-3), Perturbed(rng, reference, 1e-6)};
    for (const Profile& client : clients) {
      const double secure =
          DecryptDivergence(*small_, EncryptedDivergence(small_->public_key(), sent, client), q);
      const double accurate = AccurateDivergence(client, reference);
      ASSERT_GT(accurate, 0);
      const double error = std::fabs(secure - accurate);
      // The documented rounding floor, ~1e-18 per unit, matters only for
      // the 1e-6 perturbations (divergences ~1e-10).
      EXPECT_LE(error, 1e-9 * accurate + 1e-18) << "q " << q;
      worst_accurate = std::max(worst_accurate, error / accurate);
      if (&client == &clients[3]) continue;
      const double plain = Divergence(client, reference);
      EXPECT_LE(std::fabs(secure - plain), 1e-9 * plain)
          << "q " << q << " plain " << plain << " secure " << secure;
      worst_plain = std::max(worst_plain, std::fabs(secure - plain) / plain);
      ++compared;
    }
  }
  EXPECT_GE(compared, 20);
  std::printf(
      "largest relative error: %.3g against Divergence() over %d profiles, %.3g against "
      "the long-double reference over all\n",
      worst_plain, compared, worst_accurate);
}

TEST_F(SecureMatchingTest, MatchesOnA2048BitKeyAtLeNetSize) {
  std::mt19937_64 rng(5);
  const Profile reference = RandomProfile(rng, 120);
  const Profile client = Perturbed(rng, reference, 0.05);
  const double plain = Divergence(client, reference);
  EXPECT_NEAR(SecureDivergence(*key_, client, reference), plain, 1e-9 * plain);
}

TEST_F(SecureMatchingTest, IdenticalProfilesGiveZero) {
  std::mt19937_64 rng(9);
  const Profile p = RandomProfile(rng, 40);
  const double div = SecureDivergence(*small_, p, p);
  EXPECT_GE(div, 0.0);
  EXPECT_NEAR(div, 0.0, 1e-15);
}

TEST_F(SecureMatchingTest, EachAnswerIsFreshlyRandomised) {
  std::mt19937_64 rng(1);
  const Profile reference = RandomProfile(rng, 4), client = RandomProfile(rng, 4);
  const SecureReference sent = EncryptReference(*small_, reference);
  const std::string a = EncryptedDivergence(small_->public_key(), sent, client);
  const std::string b = EncryptedDivergence(small_->public_key(), sent, client);
  EXPECT_NE(a, b);
  EXPECT_EQ(DecryptDivergence(*small_, a, 4), DecryptDivergence(*small_, b, 4));
}

TEST_F(SecureMatchingTest, MismatchedClientProfilesAreRefused) {
  std::mt19937_64 rng(3);
  const Profile reference = RandomProfile(rng, 6);
  const SecureReference sent = EncryptReference(*small_, reference);
  const PaillierPublicKey& pub = small_->public_key();

  ExpectError([&] { EncryptedDivergence(pub, sent, RandomProfile(rng, 5)); },
              "client profile: profile has 5 units, the reference 6");
  Profile other_layer = RandomProfile(rng, 6);
  other_layer.layer = "fc2";
  ExpectError([&] { EncryptedDivergence(pub, sent, other_layer); }, "layer 'fc2'");
  ExpectError([&] { EncryptedDivergence(pub, sent, RandomProfile(rng, 6, 4)); },
              "model version 4, the reference of 3");
  Profile bad = RandomProfile(rng, 6);
  bad.var[2] = 0;
  ExpectError([&] { EncryptedDivergence(pub, sent, bad); }, "variance <= 0 at unit 2");
  bad.var[2] = std::nan("");
  ExpectError([&] { EncryptedDivergence(pub, sent, bad); }, "non-finite variance at unit 2");
  Profile huge = RandomProfile(rng, 6);
  huge.mean[1] = 1e200;
  ExpectError([&] { EncryptedDivergence(pub, sent, huge); }, "fixed point");

  Profile bad_reference = reference;
  bad_reference.var[0] = -1;
  ExpectError([&] { EncryptReference(*small_, bad_reference); },
              "reference profile: variance <= 0");
  bad_reference.var[0] = 1e-200;  // w = 1/(2·1e-200) does not fit the encoding
  ExpectError([&] { EncryptReference(*small_, bad_reference); }, "fixed point: w");
  ExpectError([&] { EncryptReference(*small_, Profile{}); }, "profile is empty");
}

TEST_F(SecureMatchingTest, ForgedOrCorruptAnswersAreRefused) {
  const PaillierPublicKey& pub = small_->public_key();
  const size_t q = 8;
  // A value no honest client can produce.
  ExpectError(
      [&] {
        DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(BigInt::PowerOfTwo(1010))),
                          q);
      },
      "outside what an honest client can encode");
  ExpectError(
      [&] {
        DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(-BigInt::PowerOfTwo(1010))),
                          q);
      },
      "outside what an honest client can encode");
  // div = −1.
  const BigInt minus_q = -(BigInt(q) * BigInt::PowerOfTwo(kDivergenceScaleBits));
  ExpectError([&] { DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(minus_q)), q); },
              "decrypts to -1, but a KL divergence is never negative");
  // Rounding-sized negatives are 0; a plausible value passes.
  EXPECT_EQ(DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(BigInt(-1000))), q),
            0.0);
  const BigInt two_q = BigInt(2 * q) * BigInt::PowerOfTwo(kDivergenceScaleBits);
  EXPECT_EQ(DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(two_q)), q), 2.0);
  ExpectError([&] { DecryptDivergence(*small_, "short", q); },
              "encrypted divergence: ciphertext: expected 256 bytes, got 5");
  ExpectError([&] { DecryptDivergence(*small_, std::string(pub.ciphertext_bytes(), '\0'), q); },
              "value is 0");
  ExpectError(
      [&] { DecryptDivergence(*small_, pub.SerializeCiphertext(pub.Encrypt(BigInt(0))), 0); },
      "0 units");
}

TEST_F(SecureMatchingTest, ReferenceWireFormat) {
  std::mt19937_64 rng(4);
  Profile reference = RandomProfile(rng, 3);
  reference.version = -7;
  reference.layer = "layer4";
  const PaillierPublicKey& pub = small_->public_key();
  const SecureReference ref = EncryptReference(*small_, reference);
  const std::string bytes = ref.Serialize();
  EXPECT_EQ(bytes.size(), 25 + 6 + 3 * 3 * pub.ciphertext_bytes());
  const SecureReference parsed = SecureReference::Parse(bytes, pub);
  EXPECT_EQ(parsed.version, -7);
  EXPECT_EQ(parsed.layer, "layer4");
  EXPECT_EQ(parsed.w, ref.w);
  EXPECT_EQ(parsed.w_mu, ref.w_mu);
  EXPECT_EQ(parsed.c, ref.c);

  ExpectError([&] { SecureReference::Parse("", pub); }, "does not start with FPSR");
  ExpectError([&] { SecureReference::Parse("XPSR" + bytes.substr(4), pub); }, "FPSR");
  std::string future = bytes;
  future[4] = 2;
  ExpectError([&] { SecureReference::Parse(future, pub); }, "format 2, expected 1");
  ExpectError([&] { SecureReference::Parse(bytes.substr(0, 10), pub); }, "truncated in version");
  ExpectError([&] { SecureReference::Parse(bytes.substr(0, bytes.size() - 1), pub); },
              "expected " + std::to_string(bytes.size()));
  ExpectError([&] { SecureReference::Parse(bytes + "!", pub); }, "for 3 units");
  // Under a key of another size the ciphertext length is wrong.
  ExpectError([&] { SecureReference::Parse(bytes, key_->public_key()); },
              "ciphertexts of 256 bytes, the key's are 512");
  // A zeroed ciphertext: the second unit of w_mu.
  std::string zeroed = bytes;
  const size_t at = 25 + 6 + (3 + 1) * pub.ciphertext_bytes();
  std::fill(zeroed.begin() + at, zeroed.begin() + at + pub.ciphertext_bytes(), '\0');
  ExpectError([&] { SecureReference::Parse(zeroed, pub); },
              "secure reference: w_mu[1]: ciphertext: value is 0");
  // Zero units.
  std::string empty = bytes.substr(0, 25 + 6);
  empty[25 + 6 - 8] = empty[25 + 6 - 7] = empty[25 + 6 - 6] = empty[25 + 6 - 5] = 0;
  ExpectError([&] { SecureReference::Parse(empty, pub); }, "0 units, expected 1..262144");
  // Arbitrary bytes after a valid header never crash.
  std::mt19937_64 noise(8);
  for (int trial = 0; trial < 50; ++trial) {
    std::string garbled = bytes;
    for (int k = 0; k < 4; ++k) garbled[noise() % garbled.size()] = static_cast<char>(noise());
    try {
      SecureReference::Parse(garbled, pub);
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace fedprof
