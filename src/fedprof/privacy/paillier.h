#ifndef FEDPROF_PRIVACY_PAILLIER_H_
#define FEDPROF_PRIVACY_PAILLIER_H_

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

// The Paillier cryptosystem (Paillier 1999) with g = n + 1, on GMP, for
// profile matching under encryption (App. C.2). <gmp.h> stays in the .cc:
// BigInt keeps its GMP integer in opaque inline storage.
//
// Randomness (primes, encryption nonces) comes from the OS CSPRNG,
// getrandom(2); GMP's own generators are never used for key material.
// Every operation whose exponent depends on the secret key uses
// mpz_powm_sec, and so does MulPlain, whose multiplier is often private
// (timing still shows its sign and limb count). GMP does not wipe the
// memory it frees, so secret values may linger on the heap. All const
// member functions are safe to call from several threads at once. Expected
// failures (malformed bytes, out-of-range values) throw fedprof::Error with
// a one-line reason.

namespace fedprof {

// Signed arbitrary-precision integer, a value type.
class BigInt {
 public:
  BigInt();  // 0
  explicit BigInt(int64_t value);
  BigInt(const BigInt& other);
  BigInt(BigInt&& other) noexcept;
  BigInt& operator=(const BigInt& other);
  BigInt& operator=(BigInt&& other) noexcept;
  ~BigInt();

  // An optionally signed decimal ("-123"); Error if malformed.
  static BigInt FromDecimal(const std::string& text);
  // The non-negative integer of big-endian bytes ("" is 0).
  static BigInt FromBytes(const std::string& big_endian);
  // round(value · 2^shift), ties away from zero, computed exactly from the
  // binary value (no intermediate rounding). Error if value is not finite.
  static BigInt FromScaled(long double value, int shift);
  static BigInt PowerOfTwo(int exponent);

  std::string ToDecimal() const;
  // The value as exactly `length` big-endian bytes; Error if it is negative
  // or needs more bytes.
  std::string ToBytes(size_t length) const;
  // value · 2^-shift as a double, truncated toward zero to 53 bits (±inf
  // beyond the double range).
  double ToDouble(int shift = 0) const;

  int sign() const;           // −1, 0 or 1
  size_t bit_length() const;  // of |value|; 0 for 0

  BigInt operator-() const;
  // round(value / 2^bits), ties away from zero; bits >= 0.
  BigInt RoundShiftRight(int bits) const;
  // round(value / divisor), ties away from zero; Error if divisor is 0.
  BigInt RoundDiv(const BigInt& divisor) const;

 private:
  friend struct BigIntAccess;  // paillier.cc's view of the GMP integer
  // An mpz_t (16 bytes on LP64; static_assert in the .cc).
  alignas(8) unsigned char storage_[16];
};

BigInt operator+(const BigInt& a, const BigInt& b);
BigInt operator-(const BigInt& a, const BigInt& b);
BigInt operator*(const BigInt& a, const BigInt& b);
int Compare(const BigInt& a, const BigInt& b);  // <0, 0, >0
inline bool operator==(const BigInt& a, const BigInt& b) { return Compare(a, b) == 0; }
inline bool operator!=(const BigInt& a, const BigInt& b) { return Compare(a, b) != 0; }
inline bool operator<(const BigInt& a, const BigInt& b) { return Compare(a, b) < 0; }
inline bool operator<=(const BigInt& a, const BigInt& b) { return Compare(a, b) <= 0; }
inline bool operator>(const BigInt& a, const BigInt& b) { return Compare(a, b) > 0; }
inline bool operator>=(const BigInt& a, const BigInt& b) { return Compare(a, b) >= 0; }
std::ostream& operator<<(std::ostream& os, const BigInt& x);  // decimal

// Smallest modulus accepted anywhere (key generation, key parsing).
constexpr int kMinPaillierKeyBits = 1024;
// Largest public key a peer may send (bounds the work a parsed key costs).
constexpr int kMaxPaillierKeyBits = 16384;

// --- Fixed-point encoding of signed reals --------------------------------
//
// x ↦ round(x · 2^scale_bits), an integer that Encrypt maps into Z_n
// (negatives as n − |x|) and DecryptSigned maps back by the centred
// representative in (−n/2, n/2). An encoded value must satisfy
// |round(x · 2^s)| < 2^kMaxEncodedBits, so that a sum of up to 2^20
// products of two encoded values stays below 2^1020 < n/2 for every
// accepted key (n >= 2^1023) and never wraps mod n. A product of values
// encoded at scales s1 and s2 decodes at scale s1 + s2.
constexpr int kMaxEncodedBits = 500;

// Error if `value` is not finite or the encoding would reach the bound.
BigInt EncodeFixed(double value, int scale_bits);
// Error if |encoded| >= 2^kMaxEncodedBits (`what` names the value).
void CheckEncodable(const BigInt& encoded, const char* what);
// encoded · 2^-scale_bits (truncated to 53 bits).
double DecodeFixed(const BigInt& encoded, int scale_bits);

// --- Paillier --------------------------------------------------------------

// An element of Z*_{n²} made by, or validated against, one key. Operations
// take ciphertexts of the key they are called on; mixing keys gives garbage.
class Ciphertext {
 public:
  const BigInt& value() const { return value_; }

 private:
  friend class PaillierPublicKey;
  friend class PaillierSecretKey;
  explicit Ciphertext(BigInt value);
  BigInt value_;
};

// Public key n (g = n + 1). Plaintexts are integers m with |m| < n, taken
// mod n.
class PaillierPublicKey {
 public:
  // n as minimal big-endian bytes. Error if empty, with a leading zero byte,
  // even, shorter than kMinPaillierKeyBits or longer than
  // kMaxPaillierKeyBits, or a perfect square.
  static PaillierPublicKey Parse(const std::string& bytes);
  std::string Serialize() const;

  const BigInt& n() const { return n_; }
  int bits() const;                 // of n
  size_t ciphertext_bytes() const;  // bytes of n², the length of every ciphertext

  // Enc(m) = (1 + m·n) · r^n mod n², r uniform in Z*_n. Error if |m| >= n.
  Ciphertext Encrypt(const BigInt& m) const;
  // Enc(m) with the given r (known-answer tests). Error if r is not in Z*_n.
  Ciphertext EncryptWithRandomness(const BigInt& m, const BigInt& r) const;
  // Enc(m1 + m2) = c1 · c2 mod n².
  Ciphertext Add(const Ciphertext& c1, const Ciphertext& c2) const;
  // Enc(k · m) = c^k mod n²; k < 0 raises c^(−1) to |k|, so the exponent is
  // never near n. Does not re-randomise (k = 0 gives the constant 1). Error
  // if |k| >= n.
  Ciphertext MulPlain(const Ciphertext& c, const BigInt& k) const;
  // Enc(−m) = c^(−1) mod n².
  Ciphertext Negate(const Ciphertext& c) const;
  // Same plaintext, fresh randomness: c · r^n mod n².
  Ciphertext Rerandomize(const Ciphertext& c) const;

  // Exactly ciphertext_bytes() big-endian bytes. Parse throws Error naming the
  // problem for a wrong length, 0, a value >= n², or one sharing a factor
  // with n (not in Z*_{n²}); it never crashes on any byte string.
  std::string SerializeCiphertext(const Ciphertext& c) const;
  Ciphertext ParseCiphertext(const std::string& bytes) const;

 private:
  friend class PaillierSecretKey;
  explicit PaillierPublicKey(BigInt n);
  BigInt n_;
  BigInt n_squared_;
};

// Secret key p, q with the CRT decryption of Paillier 1999 section 7:
// m_p = L_p(c^(p−1) mod p²) · h_p mod p, h_p = L_p(g^(p−1) mod p²)^(−1) mod p
// (likewise for q), m = CRT(m_p, m_q). Holds its public key.
class PaillierSecretKey {
 public:
  static constexpr int kDefaultBits = 2048;

  // Primes of exactly bits/2 bits with the top two bits set, so n has
  // exactly `bits` bits; p ≠ q; gcd(pq, (p−1)(q−1)) = 1. Candidates come from
  // getrandom(2), are sieved by the primes below 2000, then must pass
  // mpz_probab_prime_p with 40 reps: with GMP >= 6.2 that is Baillie-PSW plus
  // 16 Miller-Rabin rounds. Error unless bits >= kMinPaillierKeyBits and a
  // multiple of 256 (2048 and 3072 are the intended sizes).
  static PaillierSecretKey Generate(int bits = kDefaultBits);
  // A key from given primes, of any size (known-answer tests, imports).
  // Error unless p and q are distinct probable primes >= 3 with
  // gcd(pq, (p−1)(q−1)) = 1.
  static PaillierSecretKey FromPrimes(const BigInt& p, const BigInt& q);

  // For the server's checkpoint: 4-byte big-endian length of p, p, 4-byte
  // length of q, q. Parse re-checks everything FromPrimes checks, plus
  // kMinPaillierKeyBits <= bits of n <= kMaxPaillierKeyBits.
  std::string Serialize() const;
  static PaillierSecretKey Parse(const std::string& bytes);

  const PaillierPublicKey& public_key() const { return public_; }

  // Enc(m) with the CRT, ~3x faster than the public Encrypt and with the
  // same output distribution (see the .cc). Error if |m| >= n.
  Ciphertext Encrypt(const BigInt& m) const;
  // Equals public_key().EncryptWithRandomness(m, r), computed with the CRT.
  Ciphertext EncryptWithRandomness(const BigInt& m, const BigInt& r) const;
  // The plaintext in [0, n) (CRT).
  BigInt Decrypt(const Ciphertext& c) const;
  // The centred plaintext in (−n/2, n/2): the signed value Encrypt was
  // given, if that was below n/2 in magnitude.
  BigInt DecryptSigned(const Ciphertext& c) const;
  // Textbook m = L(c^λ mod n²) · μ mod n, λ = lcm(p−1, q−1),
  // μ = L(g^λ mod n²)^(−1) mod n; slower, kept to check Decrypt against.
  BigInt DecryptWithoutCrt(const Ciphertext& c) const;

 private:
  PaillierSecretKey(const BigInt& p, const BigInt& q);
  PaillierPublicKey public_;
  BigInt p_, q_, p_squared_, q_squared_;
  BigInt h_p_, h_q_;                                  // Paillier 1999 section 7
  BigInt p_inverse_mod_q_;                            // CRT recombination mod n
  BigInt p_squared_inverse_mod_q_squared_;            // CRT recombination mod n²
  BigInt n_mod_phi_p_squared_, n_mod_phi_q_squared_;  // r^n mod p² = r^(n mod p(p−1))
  BigInt lambda_, mu_;                                // textbook decryption only
};

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_PAILLIER_H_
