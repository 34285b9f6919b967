#include "fedprof/privacy/paillier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "fedprof/core/error.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

BigInt Dec(const char* text) { return BigInt::FromDecimal(text); }

// One 2048-bit key for the whole suite: key generation is the slow part.
class PaillierTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { key_ = new PaillierSecretKey(PaillierSecretKey::Generate()); }
  static void TearDownTestSuite() {
    delete key_;
    key_ = nullptr;
  }
  static const PaillierSecretKey& key() { return *key_; }
  static const PaillierPublicKey& pub() { return key_->public_key(); }

  static PaillierSecretKey* key_;
};

PaillierSecretKey* PaillierTest::key_ = nullptr;

// Known answers computed independently with Python 3's big integers:
//   n = p*q; c = pow(n + 1, m, n*n) * pow(r, n, n*n) % (n*n)
//   (m < 0 encrypted as n + m); c^k = pow(c, k, n*n), negative k included;
//   decryption checked as L(pow(c, lam, n*n)) * mu % n, L(x) = (x - 1) // n,
//   lam = lcm(p - 1, q - 1), mu = pow(L(pow(n + 1, lam, n*n)), -1, n).
struct KnownAnswer {
  const char* p;
  const char* q;
  const char* r;
  const char* m;
  const char* c;                // Enc(m; r)
  const char* c_negated_m;      // Enc(n − m; r)
  const char* c_times_minus_3;  // c^(−3) mod n², an encryption of −3m mod n
  const char* minus_3m_mod_n;
};

const KnownAnswer kKnownAnswers[] = {
    {"7", "11", "23", "42", "3840", "3301", "2157", "28"},
    // p = 2^107 − 1, q = 2^127 − 1 (Mersenne primes),
    // r = 0x1234567890abcdef1234567890abcdef1234567890abcdef mod n.
    {"162259276829213363391578010288127", "170141183460469231731687303715884105727",
     "446371678903360124661747118626766461972311602250509962735",
     "31415926535897932384626433832795028841971",
     "21999079592036028921827241468912580618512538423920893893197425416688904246562921647053560"
     "4519392732111421139298382269367908218733126592706910",
     "26996117887677294190467485928400383936109222189018424571589558458585830509445244939728267"
     "1016182895341111199134140064082923427207147388289824",
     "53379329891352002856966303304510140770562285806172788780397188229160526434017230614277875"
     "6332764753979648735040675895773851784100535774364110",
     "27606985387162255149739023449013683888851022345466721868456417914277416"},
};

TEST_F(PaillierTest, KnownAnswers) {
  for (const KnownAnswer& v : kKnownAnswers) {
    SCOPED_TRACE(v.p);
    const PaillierSecretKey k = PaillierSecretKey::FromPrimes(Dec(v.p), Dec(v.q));
    const PaillierPublicKey& pk = k.public_key();
    const BigInt m = Dec(v.m);
    const Ciphertext c = pk.EncryptWithRandomness(m, Dec(v.r));
    EXPECT_EQ(c.value(), Dec(v.c));
    EXPECT_EQ(k.EncryptWithRandomness(m, Dec(v.r)).value(), Dec(v.c));  // CRT path
    EXPECT_EQ(k.Decrypt(c), m);
    EXPECT_EQ(k.DecryptWithoutCrt(c), m);

    const Ciphertext negated = pk.EncryptWithRandomness(-m, Dec(v.r));
    EXPECT_EQ(negated.value(), Dec(v.c_negated_m));
    EXPECT_EQ(k.Decrypt(negated), pk.n() - m);

    const Ciphertext scaled = pk.MulPlain(c, BigInt(-3));
    EXPECT_EQ(scaled.value(), Dec(v.c_times_minus_3));
    EXPECT_EQ(k.Decrypt(scaled), Dec(v.minus_3m_mod_n));
  }
  // With the larger key, −m is inside the centred range.
  const KnownAnswer& v = kKnownAnswers[1];
  const PaillierSecretKey k = PaillierSecretKey::FromPrimes(Dec(v.p), Dec(v.q));
  EXPECT_EQ(k.DecryptSigned(k.public_key().EncryptWithRandomness(-Dec(v.m), Dec(v.r))), -Dec(v.m));
}

TEST_F(PaillierTest, KeyGenerationGivesExactlyTheAskedBits) {
  EXPECT_EQ(pub().bits(), 2048);
  EXPECT_EQ(pub().ciphertext_bytes(), 512u);
  const PaillierSecretKey k3072 = PaillierSecretKey::Generate(3072);  // ~0.3 s here
  EXPECT_EQ(k3072.public_key().bits(), 3072);
  EXPECT_EQ(k3072.DecryptSigned(k3072.public_key().Encrypt(BigInt(-5))), BigInt(-5));
  for (int bits : {0, 512, 1000, 1152, 2047}) {
    ExpectError([&] { PaillierSecretKey::Generate(bits); }, "multiple of 256");
  }
}

TEST_F(PaillierTest, RoundTripIncludingNegativeAndZero) {
  const BigInt half = (pub().n() - BigInt(1)).RoundShiftRight(1) - BigInt(1);  // (n−1)/2
  for (const BigInt& m : {BigInt(0), BigInt(1), BigInt(-1), BigInt(123456789), BigInt(-987654321),
                          BigInt::PowerOfTwo(1500), -BigInt::PowerOfTwo(2000), half, -half}) {
    for (const Ciphertext& c : {pub().Encrypt(m), key().Encrypt(m)}) {
      EXPECT_EQ(key().DecryptSigned(c), m);
      EXPECT_EQ(key().Decrypt(c), m.sign() < 0 ? pub().n() + m : m);
    }
  }
  ExpectError([&] { pub().Encrypt(pub().n()); }, "not below n");
  ExpectError([&] { key().Encrypt(-pub().n()); }, "not below n");
}

TEST_F(PaillierTest, HomomorphicAdditionAndPlaintextMultiplication) {
  const Ciphertext a = pub().Encrypt(BigInt(1000));
  const Ciphertext b = pub().Encrypt(BigInt(-2345));
  EXPECT_EQ(key().DecryptSigned(pub().Add(a, b)), BigInt(-1345));
  EXPECT_EQ(key().DecryptSigned(pub().MulPlain(a, BigInt(7))), BigInt(7000));
  EXPECT_EQ(key().DecryptSigned(pub().MulPlain(a, BigInt(-7))), BigInt(-7000));
  EXPECT_EQ(key().DecryptSigned(pub().MulPlain(b, BigInt(-3))), BigInt(7035));
  EXPECT_EQ(key().DecryptSigned(pub().MulPlain(b, BigInt(0))), BigInt(0));
  const BigInt big = BigInt::PowerOfTwo(300) + BigInt(12345);
  EXPECT_EQ(key().DecryptSigned(pub().MulPlain(b, -big)), big * BigInt(2345));
  EXPECT_EQ(key().DecryptSigned(pub().Negate(b)), BigInt(2345));
  ExpectError([&] { pub().MulPlain(a, pub().n()); }, "not below n");
}

TEST_F(PaillierTest, RerandomizeChangesTheCiphertextNotThePlaintext) {
  const Ciphertext c = pub().Encrypt(BigInt(-77));
  const Ciphertext d = pub().Rerandomize(c);
  EXPECT_NE(c.value(), d.value());
  EXPECT_EQ(key().DecryptSigned(d), BigInt(-77));
  // Fresh encryptions of one message differ too.
  EXPECT_NE(pub().Encrypt(BigInt(5)).value(), pub().Encrypt(BigInt(5)).value());
  EXPECT_NE(key().Encrypt(BigInt(5)).value(), key().Encrypt(BigInt(5)).value());
}

TEST_F(PaillierTest, CrtAgreesWithTextbook) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5; ++i) {
    std::string bytes(200, '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    const BigInt m = BigInt::FromBytes(bytes);
    const BigInt r = BigInt::FromBytes(bytes.substr(0, 150)) + BigInt(1);
    const Ciphertext c = pub().EncryptWithRandomness(m, r);
    EXPECT_EQ(key().EncryptWithRandomness(m, r).value(), c.value());
    EXPECT_EQ(key().Decrypt(c), m);
    EXPECT_EQ(key().DecryptWithoutCrt(c), m);
    const Ciphertext fresh = key().Encrypt(m);
    EXPECT_EQ(key().DecryptWithoutCrt(fresh), key().Decrypt(fresh));
  }
  ExpectError([&] { pub().EncryptWithRandomness(BigInt(1), BigInt(0)); }, "not in Z*_n");
  ExpectError([&] { pub().EncryptWithRandomness(BigInt(1), pub().n()); }, "not in Z*_n");
}

TEST_F(PaillierTest, CiphertextSerialisationRoundTrip) {
  const Ciphertext c = pub().Encrypt(BigInt(-42));
  const std::string bytes = pub().SerializeCiphertext(c);
  EXPECT_EQ(bytes.size(), pub().ciphertext_bytes());
  EXPECT_EQ(key().DecryptSigned(pub().ParseCiphertext(bytes)), BigInt(-42));
}

TEST_F(PaillierTest, MalformedCiphertextsAreRefused) {
  const size_t length = pub().ciphertext_bytes();
  const BigInt n2 = pub().n() * pub().n();
  ExpectError([&] { pub().ParseCiphertext(""); }, "expected 512 bytes, got 0");
  ExpectError([&] { pub().ParseCiphertext(std::string(length - 1, '\1')); }, "got 511");
  ExpectError([&] { pub().ParseCiphertext(std::string(length + 1, '\1')); }, "got 513");
  ExpectError([&] { pub().ParseCiphertext(std::string(length, '\0')); }, "value is 0");
  ExpectError([&] { pub().ParseCiphertext(n2.ToBytes(length)); }, "not below n^2");
  ExpectError([&] { pub().ParseCiphertext((n2 + BigInt(1)).ToBytes(length)); }, "not below n^2");
  ExpectError([&] { pub().ParseCiphertext(std::string(length, '\xff')); }, "not below n^2");
  // A multiple of a prime factor of n is not in Z*_{n²}. Build one from the
  // key's own factor via a serialized secret key (p is its first field).
  const std::string secret = key().Serialize();
  const BigInt p = BigInt::FromBytes(secret.substr(4, 128));
  ExpectError([&] { pub().ParseCiphertext((p * BigInt(3)).ToBytes(length)); },
              "shares a factor with n");
  ExpectError([&] { pub().ParseCiphertext(pub().n().ToBytes(length)); }, "shares a factor with n");
}

TEST_F(PaillierTest, PublicKeyParsing) {
  const PaillierPublicKey parsed = PaillierPublicKey::Parse(pub().Serialize());
  EXPECT_EQ(parsed.n(), pub().n());
  EXPECT_EQ(pub().Serialize().size(), 256u);
  EXPECT_EQ(key().DecryptSigned(parsed.Encrypt(BigInt(-9))), BigInt(-9));

  ExpectError([] { PaillierPublicKey::Parse(""); }, "empty");
  ExpectError([&] { PaillierPublicKey::Parse(std::string(1, '\0') + pub().Serialize()); },
              "leading zero");
  ExpectError([&] { PaillierPublicKey::Parse((pub().n() + BigInt(1)).ToBytes(256)); }, "even");
  ExpectError([] { PaillierPublicKey::Parse((BigInt::PowerOfTwo(1000) + BigInt(1)).ToBytes(126)); },
              "fewer than 1024");
  const BigInt odd = BigInt::PowerOfTwo(600) + BigInt(3);
  ExpectError([&] { PaillierPublicKey::Parse((odd * odd).ToBytes(151)); }, "perfect square");
  ExpectError([] { PaillierPublicKey::Parse(std::string(2049, '\x01')); }, "more than 16384");
}

TEST_F(PaillierTest, SecretKeySerialisation) {
  const std::string bytes = key().Serialize();
  const PaillierSecretKey parsed = PaillierSecretKey::Parse(bytes);
  EXPECT_EQ(parsed.public_key().n(), pub().n());
  EXPECT_EQ(parsed.DecryptSigned(pub().Encrypt(BigInt(-31))), BigInt(-31));

  ExpectError([] { PaillierSecretKey::Parse(""); }, "p: truncated length");
  ExpectError([&] { PaillierSecretKey::Parse(bytes.substr(0, bytes.size() - 1)); }, "q: truncated");
  ExpectError([&] { PaillierSecretKey::Parse(bytes + "x"); }, "1 trailing bytes");
  // p replaced by 2^1023 + 1, odd and divisible by 3.
  const std::string not_prime = bytes.substr(0, 4) +
                                (BigInt::PowerOfTwo(1023) + BigInt(1)).ToBytes(128) +
                                bytes.substr(4 + 128);
  ExpectError([&] { PaillierSecretKey::Parse(not_prime); }, "p is not prime");
  // The tiny known-answer key serialises but is refused as too small.
  const PaillierSecretKey tiny = PaillierSecretKey::FromPrimes(BigInt(7), BigInt(11));
  ExpectError([&] { PaillierSecretKey::Parse(tiny.Serialize()); }, "n has 7 bits");
  ExpectError([] { PaillierSecretKey::FromPrimes(BigInt(7), BigInt(7)); }, "p equals q");
  ExpectError([] { PaillierSecretKey::FromPrimes(BigInt(9), BigInt(7)); }, "p is not prime");
  // gcd(3·7, 2·6) = 3.
  ExpectError([] { PaillierSecretKey::FromPrimes(BigInt(3), BigInt(7)); }, "gcd");
}

TEST_F(PaillierTest, ArbitraryBytesNeverCrashTheParsers) {
  std::mt19937_64 rng(11);
  const size_t sizes[] = {0, 1, 3, 4, 5, 8, 64, 127, 128, 255, 256, 257, 511, 512, 513, 1000};
  int accepted = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(sizes[trial % 16], '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    // A few with a plausible length prefix, to get past the first check.
    if (trial % 3 == 0 && bytes.size() >= 8) bytes[0] = bytes[1] = bytes[2] = 0;
    for (auto parse :
         {+[](const std::string&s, const PaillierPublicKey&k) { k.ParseCiphertext(s); },
          +[](const std::string&s, const PaillierPublicKey&) { PaillierPublicKey::Parse(s); },
          +[](const std::string&s, const PaillierPublicKey&) { PaillierSecretKey::Parse(s); }}) {
      try {
        parse(bytes, pub());
        ++accepted;
      } catch (const Error&) {
      }
    }
  }
  // Random 512-byte strings are mostly valid ciphertexts, so a few pass.
  EXPECT_GT(accepted, 0);
}

TEST(FixedPointTest, RoundTripAndRounding) {
  for (double v : {0.0, 1.5, -2.25, 1e-30, -50.123456789, 1234567.875, 3.0e20}) {
    for (int scale : {0, 32, 96, 128, 224}) {
      const double decoded = DecodeFixed(EncodeFixed(v, scale), scale);
      EXPECT_NEAR(decoded, v, std::ldexp(1.0, -scale) + 1e-15 * std::fabs(v)) << v << " " << scale;
    }
  }
  // Exact: 2^-128-granular values survive at scale 128; rounding is to nearest,
  // ties away from zero.
  EXPECT_EQ(EncodeFixed(std::ldexp(3.0, -128), 128), BigInt(3));
  EXPECT_EQ(EncodeFixed(2.5, 0), BigInt(3));
  EXPECT_EQ(EncodeFixed(-2.5, 0), BigInt(-3));
  EXPECT_EQ(EncodeFixed(2.4999, 0), BigInt(2));
  EXPECT_EQ(EncodeFixed(-0.75, 1), BigInt(-2));
  // The double nearest 0.1 is 3602879701896397 / 2^55, so exactly:
  EXPECT_EQ(EncodeFixed(0.1, 64), BigInt::FromDecimal("1844674407370955264"));
}

TEST(FixedPointTest, OverflowAndNonFiniteAreRefused) {
  EXPECT_EQ(EncodeFixed(std::ldexp(1.0, 399) * 1.9, 100).bit_length(), 500u);
  ExpectError([] { EncodeFixed(std::ldexp(1.0, 400), 100); }, "not below 2^500");
  ExpectError([] { EncodeFixed(-std::ldexp(1.0, 450), 64); }, "not below 2^500");
  ExpectError([] { EncodeFixed(std::numeric_limits<double>::quiet_NaN(), 8); }, "not finite");
  ExpectError([] { EncodeFixed(std::numeric_limits<double>::infinity(), 8); }, "not finite");
  ExpectError([] { EncodeFixed(-std::numeric_limits<double>::infinity(), 8); }, "not finite");
  ExpectError([] { CheckEncodable(BigInt::PowerOfTwo(500), "x"); }, "x needs 501 bits");
  CheckEncodable(BigInt::PowerOfTwo(500) - BigInt(1), "x");
}

TEST_F(PaillierTest, EncodedArithmeticUnderEncryption) {
  // (−3.25 at scale 64) · (1.5 at scale 32) + 0.125 at scale 96 = −4.75.
  const Ciphertext x = pub().Encrypt(EncodeFixed(-3.25, 64));
  const Ciphertext sum =
      pub().Add(pub().MulPlain(x, EncodeFixed(1.5, 32)), pub().Encrypt(EncodeFixed(0.125, 96)));
  EXPECT_EQ(DecodeFixed(key().DecryptSigned(sum), 96), -4.75);
}

TEST(FixedPointTest, HeadroomFor2To20ProductsOnTheSmallestKey) {
  // The largest encodable magnitude squared, times 2^20 (as if summed that
  // many times), still decrypts to itself on a 1024-bit key.
  const PaillierSecretKey k = PaillierSecretKey::Generate(1024);
  const BigInt top = BigInt::PowerOfTwo(kMaxEncodedBits) - BigInt(1);
  const Ciphertext product = k.public_key().MulPlain(k.Encrypt(-top), top);
  const Ciphertext scaled = k.public_key().MulPlain(product, BigInt::PowerOfTwo(20));
  EXPECT_EQ(k.DecryptSigned(scaled), -(top * top * BigInt::PowerOfTwo(20)));
}

TEST(BigIntTest, Basics) {
  EXPECT_EQ(BigInt::FromDecimal("-123456789012345678901234567890").ToDecimal(),
            "-123456789012345678901234567890");
  ExpectError([] { BigInt::FromDecimal("12a"); }, "not a decimal integer");
  ExpectError([] { BigInt::FromDecimal(""); }, "not a decimal integer");
  ExpectError([] { BigInt::FromDecimal("-"); }, "not a decimal integer");
  EXPECT_EQ(BigInt::FromBytes(std::string("\x01\x00", 2)), BigInt(256));
  EXPECT_EQ(BigInt(258).ToBytes(4), std::string("\0\0\x01\x02", 4));
  ExpectError([] { BigInt(70000).ToBytes(2); }, "needs 3 bytes");
  ExpectError([] { BigInt(-1).ToBytes(2); }, "negative");
  EXPECT_EQ(BigInt(7).RoundShiftRight(1), BigInt(4));    // 3.5 → 4
  EXPECT_EQ(BigInt(-7).RoundShiftRight(1), BigInt(-4));  // −3.5 → −4
  EXPECT_EQ(BigInt(5).RoundShiftRight(2), BigInt(1));    // 1.25 → 1
  EXPECT_EQ(BigInt(7).RoundDiv(BigInt(2)), BigInt(4));
  EXPECT_EQ(BigInt(-7).RoundDiv(BigInt(3)), BigInt(-2));
  EXPECT_EQ(BigInt(8).RoundDiv(BigInt(-3)), BigInt(-3));
  ExpectError([] { BigInt(1).RoundDiv(BigInt(0)); }, "division by zero");
  EXPECT_EQ(BigInt::FromScaled(0.1L, 0), BigInt(0));
  EXPECT_EQ(BigInt::FromScaled(-1e-300L, 1100).sign(), -1);
  EXPECT_EQ(BigInt(-3).ToDouble(2), -0.75);
  EXPECT_EQ(BigInt::PowerOfTwo(2000).ToDouble(), std::numeric_limits<double>::infinity());
  BigInt a(5);
  BigInt b = std::move(a);
  a = BigInt(6);  // a moved-from BigInt is a valid value
  EXPECT_EQ(a + b, BigInt(11));
}

}  // namespace
}  // namespace fedprof
