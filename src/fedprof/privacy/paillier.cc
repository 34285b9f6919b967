#include "fedprof/privacy/paillier.h"

#include <gmp.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <new>
#include <ostream>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

static_assert(sizeof(__mpz_struct) <= 16 && alignof(__mpz_struct) <= 8,
              "BigInt::storage_ cannot hold an mpz_t on this platform");
static_assert(sizeof(long) >= sizeof(int64_t), "BigInt(int64_t) assumes a 64-bit long");

struct BigIntAccess {
  static mpz_ptr Get(BigInt& x) { return std::launder(reinterpret_cast<mpz_ptr>(x.storage_)); }
  static mpz_srcptr Get(const BigInt& x) {
    return std::launder(reinterpret_cast<mpz_srcptr>(x.storage_));
  }
  static void Init(BigInt& x) { mpz_init(new (x.storage_) __mpz_struct); }
};

namespace {

mpz_ptr Z(BigInt& x) { return BigIntAccess::Get(x); }
mpz_srcptr Z(const BigInt& x) { return BigIntAccess::Get(x); }

// RAII scratch integer for intermediate values.
class Mpz {
 public:
  Mpz() { mpz_init(v_); }
  ~Mpz() { mpz_clear(v_); }
  Mpz(const Mpz&) = delete;
  Mpz& operator=(const Mpz&) = delete;
  // Implicit on purpose: an Mpz goes straight into mpz_* calls.
  operator mpz_ptr() { return v_; }  // NOLINT(google-explicit-constructor)

 private:
  mpz_t v_;
};

// mpz_cmp_ui is a macro that needs a real mpz pointer, not an Mpz.
bool IsOne(mpz_srcptr x) { return mpz_cmp_ui(x, 1) == 0; }

// out = round(in / 2^bits), ties away from zero.
void RoundShift(mpz_ptr out, mpz_srcptr in, mp_bitcnt_t bits) {
  if (bits == 0) {
    mpz_set(out, in);
    return;
  }
  const int sign = mpz_sgn(in);
  mpz_abs(out, in);
  const bool round_up = mpz_tstbit(out, bits - 1);
  mpz_fdiv_q_2exp(out, out, bits);
  if (round_up) mpz_add_ui(out, out, 1);
  if (sign < 0) mpz_neg(out, out);
}

void Invert(mpz_ptr out, mpz_srcptr x, mpz_srcptr modulus, const char* what) {
  if (mpz_invert(out, x, modulus) == 0) {
    throw Error(std::string("paillier: ") + what + " is not invertible");
  }
}

// --- OS randomness --------------------------------------------------------

void RandomBytes(unsigned char* buffer, size_t length) {
  size_t done = 0;
  while (done < length) {
    const ssize_t got = getrandom(buffer + done, length - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("paillier: getrandom failed: ") + strerror(errno));
    }
    done += static_cast<size_t>(got);
  }
}

// `bits` uniformly random bits.
void RandomBits(mpz_ptr out, size_t bits) {
  std::vector<unsigned char> buffer((bits + 7) / 8);
  RandomBytes(buffer.data(), buffer.size());
  mpz_import(out, buffer.size(), 1, 1, 1, 0, buffer.data());
  explicit_bzero(buffer.data(), buffer.size());
  mpz_fdiv_r_2exp(out, out, bits);
}

// Uniform in [1, bound) and coprime to bound, by rejection (each try
// succeeds with probability >= 1/2 · φ(bound)/bound).
void RandomUnit(mpz_ptr out, mpz_srcptr bound) {
  const size_t bits = mpz_sizeinbase(bound, 2);
  Mpz g;
  for (;;) {
    RandomBits(out, bits);
    if (mpz_sgn(out) == 0 || mpz_cmp(out, bound) >= 0) continue;
    mpz_gcd(g, out, bound);
    if (IsOne(g)) return;
  }
}

// --- Primes ---------------------------------------------------------------

// unsigned long throughout: the type mpz_fdiv_ui takes.
const std::vector<unsigned long>& SmallOddPrimes() {
  static const std::vector<unsigned long> primes = [] {
    constexpr unsigned long kLimit = 2000;
    std::vector<bool> composite(kLimit, false);
    std::vector<unsigned long> out;
    for (unsigned long i = 3; i < kLimit; i += 2) {
      if (composite[i]) continue;
      out.push_back(i);
      for (unsigned long j = i * i; j < kLimit; j += 2 * i) composite[j] = true;
    }
    return out;
  }();
  return primes;
}

constexpr int kPrimalityReps = 40;  // GMP >= 6.2: Baillie-PSW + 16 Miller-Rabin

// A probable prime of exactly `bits` bits whose top two bits are set.
void RandomPrime(mpz_ptr out, size_t bits) {
  for (;;) {
    RandomBits(out, bits);
    mpz_setbit(out, bits - 1);
    mpz_setbit(out, bits - 2);
    mpz_setbit(out, 0);
    bool small_factor = false;
    for (unsigned long sp : SmallOddPrimes()) {
      if (mpz_fdiv_ui(out, sp) == 0) {
        small_factor = true;
        break;
      }
    }
    if (!small_factor && mpz_probab_prime_p(out, kPrimalityReps) > 0) return;
  }
}

std::string Uint32Bytes(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

// Reads a 4-byte length and that many bytes of a canonical (no leading zero
// byte) positive integer from `bytes` at `*pos`.
BigInt ReadLengthPrefixed(const std::string& bytes, size_t* pos, const char* what) {
  const std::string where = std::string("paillier secret key: ") + what;
  if (bytes.size() - *pos < 4) throw Error(where + ": truncated length");
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i) length = (length << 8) | static_cast<unsigned char>(bytes[*pos + i]);
  *pos += 4;
  if (length == 0 || length > kMaxPaillierKeyBits / 8) {
    throw Error(where + ": length " + std::to_string(length) + " outside 1.." +
                std::to_string(kMaxPaillierKeyBits / 8));
  }
  if (bytes.size() - *pos < length) throw Error(where + ": truncated");
  if (bytes[*pos] == 0) throw Error(where + ": leading zero byte");
  BigInt v = BigInt::FromBytes(bytes.substr(*pos, length));
  *pos += length;
  return v;
}

}  // namespace

// --- BigInt ---------------------------------------------------------------

BigInt::BigInt() { BigIntAccess::Init(*this); }
BigInt::BigInt(int64_t value) {
  BigIntAccess::Init(*this);
  mpz_set_si(Z(*this), static_cast<long>(value));
}
BigInt::BigInt(const BigInt& other) {
  BigIntAccess::Init(*this);
  mpz_set(Z(*this), Z(other));
}
BigInt::BigInt(BigInt&& other) noexcept {
  BigIntAccess::Init(*this);  // no allocation since GMP 6.2
  mpz_swap(Z(*this), Z(other));
}
BigInt& BigInt::operator=(const BigInt& other) {
  if (this != &other) mpz_set(Z(*this), Z(other));
  return *this;
}
BigInt& BigInt::operator=(BigInt&& other) noexcept {
  mpz_swap(Z(*this), Z(other));
  return *this;
}
BigInt::~BigInt() { mpz_clear(Z(*this)); }

BigInt BigInt::FromDecimal(const std::string& text) {
  const size_t digits_from = (!text.empty() && text[0] == '-') ? 1 : 0;
  bool ok = text.size() > digits_from;
  for (size_t i = digits_from; ok && i < text.size(); ++i) ok = text[i] >= '0' && text[i] <= '9';
  if (!ok) throw Error("big integer: '" + Printable(text) + "' is not a decimal integer");
  BigInt x;
  mpz_set_str(Z(x), text.c_str(), 10);
  return x;
}

BigInt BigInt::FromBytes(const std::string& big_endian) {
  BigInt x;
  if (!big_endian.empty()) mpz_import(Z(x), big_endian.size(), 1, 1, 1, 0, big_endian.data());
  return x;
}

BigInt BigInt::FromScaled(long double value, int shift) {
  if (!std::isfinite(value)) throw Error("big integer: cannot scale a non-finite value");
  BigInt x;
  if (value == 0) return x;
  // value = ±f · 2^e with f in [0.5, 1); peel f's bits 32 at a time (each
  // step is exact), so |value| = mantissa · 2^(e − consumed).
  int e = 0;
  long double f = std::frexp(std::fabs(value), &e);
  long consumed = 0;
  while (f != 0) {
    f = std::ldexp(f, 32);
    const auto chunk = static_cast<unsigned long>(f);
    f -= static_cast<long double>(chunk);
    mpz_mul_2exp(Z(x), Z(x), 32);
    mpz_add_ui(Z(x), Z(x), chunk);
    consumed += 32;
  }
  const long exponent = static_cast<long>(e) - consumed + shift;
  if (exponent >= 0) {
    mpz_mul_2exp(Z(x), Z(x), static_cast<mp_bitcnt_t>(exponent));
  } else {
    RoundShift(Z(x), Z(x), static_cast<mp_bitcnt_t>(-exponent));
  }
  if (value < 0) mpz_neg(Z(x), Z(x));
  return x;
}

BigInt BigInt::PowerOfTwo(int exponent) {
  if (exponent < 0) throw Error("big integer: negative power of two");
  BigInt x;
  mpz_setbit(Z(x), static_cast<mp_bitcnt_t>(exponent));
  return x;
}

std::string BigInt::ToDecimal() const {
  std::string s(mpz_sizeinbase(Z(*this), 10) + 2, '\0');
  mpz_get_str(&s[0], 10, Z(*this));
  s.resize(strlen(s.c_str()));
  return s;
}

std::string BigInt::ToBytes(size_t length) const {
  if (sign() < 0) throw Error("big integer: cannot write a negative value as bytes");
  const size_t needed = (bit_length() + 7) / 8;
  if (needed > length) {
    throw Error("big integer: needs " + std::to_string(needed) + " bytes, only " +
                std::to_string(length) + " allowed");
  }
  std::string out(length, '\0');
  if (needed > 0) mpz_export(&out[length - needed], nullptr, 1, 1, 1, 0, Z(*this));
  return out;
}

double BigInt::ToDouble(int shift) const {
  if (sign() == 0) return 0.0;
  long exponent = 0;
  const double mantissa = mpz_get_d_2exp(&exponent, Z(*this));
  const long e = exponent - shift;
  // ldexp saturates to ±inf or 0 far beyond the double range; clamp to int.
  const int clamped =
      e > INT_MAX / 2 ? INT_MAX / 2 : (e < INT_MIN / 2 ? INT_MIN / 2 : static_cast<int>(e));
  return std::ldexp(mantissa, clamped);
}

int BigInt::sign() const { return mpz_sgn(Z(*this)); }

size_t BigInt::bit_length() const { return sign() == 0 ? 0 : mpz_sizeinbase(Z(*this), 2); }

BigInt BigInt::operator-() const {
  BigInt x;
  mpz_neg(Z(x), Z(*this));
  return x;
}

BigInt BigInt::RoundShiftRight(int bits) const {
  if (bits < 0) throw Error("big integer: negative shift");
  BigInt x;
  RoundShift(Z(x), Z(*this), static_cast<mp_bitcnt_t>(bits));
  return x;
}

BigInt BigInt::RoundDiv(const BigInt& divisor) const {
  if (divisor.sign() == 0) throw Error("big integer: division by zero");
  Mpz a, b, r;
  mpz_abs(a, Z(*this));
  mpz_abs(b, Z(divisor));
  BigInt x;
  mpz_tdiv_qr(Z(x), r, a, b);
  mpz_mul_2exp(r, r, 1);
  if (mpz_cmp(r, b) >= 0) mpz_add_ui(Z(x), Z(x), 1);
  if (sign() * divisor.sign() < 0) mpz_neg(Z(x), Z(x));
  return x;
}

BigInt operator+(const BigInt& a, const BigInt& b) {
  BigInt x;
  mpz_add(Z(x), Z(a), Z(b));
  return x;
}
BigInt operator-(const BigInt& a, const BigInt& b) {
  BigInt x;
  mpz_sub(Z(x), Z(a), Z(b));
  return x;
}
BigInt operator*(const BigInt& a, const BigInt& b) {
  BigInt x;
  mpz_mul(Z(x), Z(a), Z(b));
  return x;
}
int Compare(const BigInt& a, const BigInt& b) { return mpz_cmp(Z(a), Z(b)); }

std::ostream& operator<<(std::ostream& os, const BigInt& x) { return os << x.ToDecimal(); }

// --- Fixed point ----------------------------------------------------------

BigInt EncodeFixed(double value, int scale_bits) {
  if (!std::isfinite(value)) throw Error("fixed point: value is not finite");
  BigInt x = BigInt::FromScaled(value, scale_bits);
  if (x.bit_length() > static_cast<size_t>(kMaxEncodedBits)) {
    throw Error("fixed point: |" + std::to_string(value) + "| * 2^" + std::to_string(scale_bits) +
                " is not below 2^" + std::to_string(kMaxEncodedBits));
  }
  return x;
}

void CheckEncodable(const BigInt& encoded, const char* what) {
  if (encoded.bit_length() > static_cast<size_t>(kMaxEncodedBits)) {
    throw Error(std::string("fixed point: ") + what + " needs " +
                std::to_string(encoded.bit_length()) + " bits, more than the " +
                std::to_string(kMaxEncodedBits) + " allowed");
  }
}

double DecodeFixed(const BigInt& encoded, int scale_bits) { return encoded.ToDouble(scale_bits); }

// --- Public key -------------------------------------------------------------

Ciphertext::Ciphertext(BigInt value) : value_(std::move(value)) {}

PaillierPublicKey::PaillierPublicKey(BigInt n) : n_(std::move(n)) {
  mpz_mul(Z(n_squared_), Z(n_), Z(n_));
}

PaillierPublicKey PaillierPublicKey::Parse(const std::string& bytes) {
  if (bytes.empty()) throw Error("paillier public key: empty");
  if (bytes[0] == 0) throw Error("paillier public key: leading zero byte");
  if (bytes.size() > kMaxPaillierKeyBits / 8) {
    throw Error("paillier public key: " + std::to_string(bytes.size() * 8) + " bits, more than " +
                std::to_string(kMaxPaillierKeyBits));
  }
  BigInt n = BigInt::FromBytes(bytes);
  if (mpz_even_p(Z(n))) throw Error("paillier public key: n is even");
  if (n.bit_length() < static_cast<size_t>(kMinPaillierKeyBits)) {
    throw Error("paillier public key: n has " + std::to_string(n.bit_length()) +
                " bits, fewer than " + std::to_string(kMinPaillierKeyBits));
  }
  if (mpz_perfect_square_p(Z(n))) throw Error("paillier public key: n is a perfect square");
  return PaillierPublicKey(std::move(n));
}

std::string PaillierPublicKey::Serialize() const { return n_.ToBytes((n_.bit_length() + 7) / 8); }

int PaillierPublicKey::bits() const { return static_cast<int>(n_.bit_length()); }

size_t PaillierPublicKey::ciphertext_bytes() const { return (n_squared_.bit_length() + 7) / 8; }

namespace {

// m mod n for |m| < n (negatives as n − |m|).
void PlaintextResidue(mpz_ptr out, const BigInt& m, const BigInt& n) {
  if (mpz_cmpabs(Z(m), Z(n)) >= 0) {
    throw Error("paillier: plaintext of " + std::to_string(m.bit_length()) +
                " bits is not below n in magnitude");
  }
  mpz_mod(out, Z(m), Z(n));
}

void CheckUnit(const BigInt& r, const BigInt& n) {
  Mpz g;
  mpz_gcd(g, Z(r), Z(n));
  if (r.sign() <= 0 || r >= n || !IsOne(g)) {
    throw Error("paillier: randomness r is not in Z*_n");
  }
}

}  // namespace

Ciphertext PaillierPublicKey::EncryptWithRandomness(const BigInt& m, const BigInt& r) const {
  CheckUnit(r, n_);
  Mpz gm, rn;
  // g^m = (1 + n)^m = 1 + m·n mod n² (binomial theorem).
  PlaintextResidue(gm, m, n_);
  mpz_mul(gm, gm, Z(n_));
  mpz_add_ui(gm, gm, 1);
  mpz_powm(rn, Z(r), Z(n_), Z(n_squared_));  // public exponent
  BigInt c;
  mpz_mul(Z(c), gm, rn);
  mpz_mod(Z(c), Z(c), Z(n_squared_));
  return Ciphertext(std::move(c));
}

Ciphertext PaillierPublicKey::Encrypt(const BigInt& m) const {
  BigInt r;
  RandomUnit(Z(r), Z(n_));
  return EncryptWithRandomness(m, r);
}

Ciphertext PaillierPublicKey::Add(const Ciphertext& c1, const Ciphertext& c2) const {
  BigInt c;
  mpz_mul(Z(c), Z(c1.value()), Z(c2.value()));
  mpz_mod(Z(c), Z(c), Z(n_squared_));
  return Ciphertext(std::move(c));
}

Ciphertext PaillierPublicKey::MulPlain(const Ciphertext& c, const BigInt& k) const {
  if (mpz_cmpabs(Z(k), Z(n_)) >= 0) {
    throw Error("paillier: plaintext multiplier of " + std::to_string(k.bit_length()) +
                " bits is not below n in magnitude");
  }
  BigInt out(1);
  if (k.sign() == 0) return Ciphertext(std::move(out));
  Mpz base, exponent;
  if (k.sign() < 0) {
    Invert(base, Z(c.value()), Z(n_squared_), "ciphertext");
  } else {
    mpz_set(base, Z(c.value()));
  }
  mpz_abs(exponent, Z(k));
  // k is often private (the client's profile in secure matching).
  mpz_powm_sec(Z(out), base, exponent, Z(n_squared_));
  return Ciphertext(std::move(out));
}

Ciphertext PaillierPublicKey::Negate(const Ciphertext& c) const {
  BigInt out;
  Invert(Z(out), Z(c.value()), Z(n_squared_), "ciphertext");
  return Ciphertext(std::move(out));
}

Ciphertext PaillierPublicKey::Rerandomize(const Ciphertext& c) const {
  return Add(c, Encrypt(BigInt(0)));
}

std::string PaillierPublicKey::SerializeCiphertext(const Ciphertext& c) const {
  return c.value().ToBytes(ciphertext_bytes());
}

Ciphertext PaillierPublicKey::ParseCiphertext(const std::string& bytes) const {
  if (bytes.size() != ciphertext_bytes()) {
    throw Error("ciphertext: expected " + std::to_string(ciphertext_bytes()) + " bytes, got " +
                std::to_string(bytes.size()));
  }
  BigInt c = BigInt::FromBytes(bytes);
  if (c.sign() == 0) throw Error("ciphertext: value is 0");
  if (c >= n_squared_) throw Error("ciphertext: value is not below n^2");
  Mpz g;
  mpz_gcd(g, Z(c), Z(n_));
  if (!IsOne(g)) throw Error("ciphertext: value shares a factor with n");
  return Ciphertext(std::move(c));
}

// --- Secret key -------------------------------------------------------------

namespace {

// h = L_p(g^(p−1) mod p²)^(−1) mod p with L_p(x) = (x − 1) / p
// (Paillier 1999 section 7).
void CrtH(mpz_ptr h, mpz_srcptr n, mpz_srcptr p, mpz_srcptr p_squared) {
  Mpz g, e;
  mpz_add_ui(g, n, 1);
  mpz_mod(g, g, p_squared);
  mpz_sub_ui(e, p, 1);
  mpz_powm_sec(h, g, e, p_squared);
  mpz_sub_ui(h, h, 1);
  mpz_divexact(h, h, p);
  Invert(h, h, p, "h_p");
}

// m_p = L_p(c^(p−1) mod p²) · h_p mod p.
void CrtHalf(mpz_ptr out, mpz_srcptr c, mpz_srcptr p, mpz_srcptr p_squared, mpz_srcptr h) {
  Mpz base, e;
  mpz_mod(base, c, p_squared);
  mpz_sub_ui(e, p, 1);
  mpz_powm_sec(out, base, e, p_squared);
  mpz_sub_ui(out, out, 1);
  mpz_divexact(out, out, p);
  mpz_mul(out, out, h);
  mpz_mod(out, out, p);
}

// x with x ≡ a (mod m1), x ≡ b (mod m2), 0 <= x < m1·m2, given m1^(−1) mod m2.
void Crt(mpz_ptr out, mpz_srcptr a, mpz_srcptr b, mpz_srcptr m1, mpz_srcptr m2,
         mpz_srcptr m1_inverse) {
  Mpz t;
  mpz_sub(t, b, a);
  mpz_mul(t, t, m1_inverse);
  mpz_mod(t, t, m2);
  mpz_mul(t, t, m1);
  mpz_add(out, a, t);
}

// (1 + m·n) · nonce mod p², the ciphertext's residue mod p².
void CrtCipherHalf(mpz_ptr out, mpz_srcptr m, mpz_srcptr n, mpz_srcptr p_squared,
                   mpz_srcptr nonce) {
  mpz_mul(out, m, n);
  mpz_add_ui(out, out, 1);
  mpz_mul(out, out, nonce);
  mpz_mod(out, out, p_squared);
}

}  // namespace

PaillierSecretKey::PaillierSecretKey(const BigInt& p, const BigInt& q)
    : public_(p * q), p_(p), q_(q), p_squared_(p * p), q_squared_(q * q) {
  const mpz_srcptr n = Z(public_.n());
  CrtH(Z(h_p_), n, Z(p_), Z(p_squared_));
  CrtH(Z(h_q_), n, Z(q_), Z(q_squared_));
  Invert(Z(p_inverse_mod_q_), Z(p_), Z(q_), "p mod q");
  Invert(Z(p_squared_inverse_mod_q_squared_), Z(p_squared_), Z(q_squared_), "p^2 mod q^2");
  // Z*_{p²} has order p(p−1).
  Mpz phi;
  mpz_sub_ui(phi, Z(p_), 1);
  mpz_mul(phi, phi, Z(p_));
  mpz_mod(Z(n_mod_phi_p_squared_), n, phi);
  mpz_sub_ui(phi, Z(q_), 1);
  mpz_mul(phi, phi, Z(q_));
  mpz_mod(Z(n_mod_phi_q_squared_), n, phi);

  Mpz p1, q1, g;
  mpz_sub_ui(p1, Z(p_), 1);
  mpz_sub_ui(q1, Z(q_), 1);
  mpz_lcm(Z(lambda_), p1, q1);
  mpz_add_ui(g, n, 1);
  mpz_powm_sec(Z(mu_), g, Z(lambda_), Z(public_.n_squared_));
  mpz_sub_ui(Z(mu_), Z(mu_), 1);
  mpz_divexact(Z(mu_), Z(mu_), n);
  Invert(Z(mu_), Z(mu_), n, "mu");
}

PaillierSecretKey PaillierSecretKey::FromPrimes(const BigInt& p, const BigInt& q) {
  if (p < BigInt(3) || q < BigInt(3)) throw Error("paillier key: p and q must be >= 3");
  if (mpz_probab_prime_p(Z(p), kPrimalityReps) == 0) throw Error("paillier key: p is not prime");
  if (mpz_probab_prime_p(Z(q), kPrimalityReps) == 0) throw Error("paillier key: q is not prime");
  if (p == q) throw Error("paillier key: p equals q");
  Mpz phi, g;
  mpz_sub_ui(phi, Z(p), 1);
  mpz_sub_ui(g, Z(q), 1);
  mpz_mul(phi, phi, g);
  const BigInt n = p * q;
  mpz_gcd(g, Z(n), phi);
  if (!IsOne(g)) throw Error("paillier key: gcd(pq, (p-1)(q-1)) is not 1");
  return PaillierSecretKey(p, q);
}

PaillierSecretKey PaillierSecretKey::Generate(int bits) {
  if (bits < kMinPaillierKeyBits || bits > kMaxPaillierKeyBits || bits % 256 != 0) {
    throw Error("paillier key: bits must be a multiple of 256 in " +
                std::to_string(kMinPaillierKeyBits) + ".." + std::to_string(kMaxPaillierKeyBits) +
                ", got " + std::to_string(bits));
  }
  const size_t half = static_cast<size_t>(bits) / 2;
  BigInt p, q;
  for (;;) {
    RandomPrime(Z(p), half);
    RandomPrime(Z(q), half);
    if (p == q) continue;
    Mpz phi, g;
    mpz_sub_ui(phi, Z(p), 1);
    mpz_sub_ui(g, Z(q), 1);
    mpz_mul(phi, phi, g);
    const BigInt n = p * q;
    mpz_gcd(g, Z(n), phi);
    if (!IsOne(g)) continue;
    // Top two bits set: p·q >= (3·2^(half−2))² > 2^(bits−1).
    if (n.bit_length() != static_cast<size_t>(bits)) continue;
    return PaillierSecretKey(p, q);
  }
}

std::string PaillierSecretKey::Serialize() const {
  const size_t p_bytes = (p_.bit_length() + 7) / 8, q_bytes = (q_.bit_length() + 7) / 8;
  return Uint32Bytes(static_cast<uint32_t>(p_bytes)) + p_.ToBytes(p_bytes) +
         Uint32Bytes(static_cast<uint32_t>(q_bytes)) + q_.ToBytes(q_bytes);
}

PaillierSecretKey PaillierSecretKey::Parse(const std::string& bytes) {
  size_t pos = 0;
  const BigInt p = ReadLengthPrefixed(bytes, &pos, "p");
  const BigInt q = ReadLengthPrefixed(bytes, &pos, "q");
  if (pos != bytes.size()) {
    throw Error("paillier secret key: " + std::to_string(bytes.size() - pos) + " trailing bytes");
  }
  const size_t bits = (p * q).bit_length();
  if (bits < static_cast<size_t>(kMinPaillierKeyBits) ||
      bits > static_cast<size_t>(kMaxPaillierKeyBits)) {
    throw Error("paillier secret key: n has " + std::to_string(bits) + " bits, outside " +
                std::to_string(kMinPaillierKeyBits) + ".." + std::to_string(kMaxPaillierKeyBits));
  }
  return FromPrimes(p, q);
}

// Fresh randomness without r: r^n mod p² depends only on r mod p and equals
// ω(r)^q, where ω(s) = s^p mod p² is the bijection of Z*_p onto the
// (p−1)-th roots of unity mod p². Since gcd(q, p−1) = 1, x ↦ x^q permutes
// those roots, so for uniform r, r^n mod p² is uniform among them, exactly
// as ω(s) is for uniform s. Independent halves mod p² and q² (CRT) therefore
// give the public Encrypt's distribution, with exponents of half the size on
// half-size moduli.
Ciphertext PaillierSecretKey::Encrypt(const BigInt& m) const {
  Mpz mm, s, omega_p, omega_q, cp, cq;
  PlaintextResidue(mm, m, public_.n());
  RandomUnit(s, Z(p_));
  mpz_powm_sec(omega_p, s, Z(p_), Z(p_squared_));
  RandomUnit(s, Z(q_));
  mpz_powm_sec(omega_q, s, Z(q_), Z(q_squared_));
  CrtCipherHalf(cp, mm, Z(public_.n()), Z(p_squared_), omega_p);
  CrtCipherHalf(cq, mm, Z(public_.n()), Z(q_squared_), omega_q);
  BigInt c;
  Crt(Z(c), cp, cq, Z(p_squared_), Z(q_squared_), Z(p_squared_inverse_mod_q_squared_));
  return Ciphertext(std::move(c));
}

Ciphertext PaillierSecretKey::EncryptWithRandomness(const BigInt& m, const BigInt& r) const {
  CheckUnit(r, public_.n());
  Mpz mm, base, nonce_p, nonce_q, cp, cq;
  PlaintextResidue(mm, m, public_.n());
  mpz_mod(base, Z(r), Z(p_squared_));
  mpz_powm_sec(nonce_p, base, Z(n_mod_phi_p_squared_), Z(p_squared_));
  mpz_mod(base, Z(r), Z(q_squared_));
  mpz_powm_sec(nonce_q, base, Z(n_mod_phi_q_squared_), Z(q_squared_));
  CrtCipherHalf(cp, mm, Z(public_.n()), Z(p_squared_), nonce_p);
  CrtCipherHalf(cq, mm, Z(public_.n()), Z(q_squared_), nonce_q);
  BigInt c;
  Crt(Z(c), cp, cq, Z(p_squared_), Z(q_squared_), Z(p_squared_inverse_mod_q_squared_));
  return Ciphertext(std::move(c));
}

BigInt PaillierSecretKey::Decrypt(const Ciphertext& c) const {
  Mpz mp, mq;
  CrtHalf(mp, Z(c.value()), Z(p_), Z(p_squared_), Z(h_p_));
  CrtHalf(mq, Z(c.value()), Z(q_), Z(q_squared_), Z(h_q_));
  BigInt m;
  Crt(Z(m), mp, mq, Z(p_), Z(q_), Z(p_inverse_mod_q_));
  return m;
}

BigInt PaillierSecretKey::DecryptSigned(const Ciphertext& c) const {
  BigInt m = Decrypt(c);
  // Centred representative: m > (n − 1)/2 ⇔ 2m > n (n odd).
  if (m + m > public_.n()) m = m - public_.n();
  return m;
}

BigInt PaillierSecretKey::DecryptWithoutCrt(const Ciphertext& c) const {
  const mpz_srcptr n = Z(public_.n());
  BigInt m;
  mpz_powm_sec(Z(m), Z(c.value()), Z(lambda_), Z(public_.n_squared_));
  mpz_sub_ui(Z(m), Z(m), 1);
  mpz_divexact(Z(m), Z(m), n);
  mpz_mul(Z(m), Z(m), Z(mu_));
  mpz_mod(Z(m), Z(m), n);
  return m;
}

}  // namespace fedprof
