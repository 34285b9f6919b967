#ifndef FEDPROF_PRIVACY_SECURE_MATCHING_H_
#define FEDPROF_PRIVACY_SECURE_MATCHING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/privacy/paillier.h"
#include "fedprof/profiling/profile.h"

// Profile matching under Paillier encryption (App. C.2, Eqs. 35-37): the
// server learns div(RP_k, RP_V) of Eq. 9 and nothing else of the client's
// profile; the client learns nothing of the reference profile.
//
// With w_i = 1/(2σ_V,i²), the Gaussian KL of Eq. 10 rearranges into terms
// that need only additions and plaintext multiplications:
//   KL_i = c_i + w_i·(σ_k,i² + μ_k,i²) − 2μ_k,i·(w_i·μ_V,i) − ½·log σ_k,i²,
//   c_i  = ½·log σ_V,i² + w_i·μ_V,i² − ½.
// 1. The server (key holder) publishes, per model version, Enc(w_i),
//    Enc(w_i·μ_V,i) and Enc(c_i) (EncryptReference).
// 2. The client raises them to its plaintext σ_k,i² + μ_k,i² and −2μ_k,i,
//    multiplies everything with one fresh Enc(Σ_i −½·log σ_k,i²) (which also
//    re-randomises the product) and returns that single ciphertext
//    (EncryptedDivergence).
// 3. The server decrypts q·div (Eq. 37 before the 1/q) and divides by q
//    (DecryptDivergence).
//
// Threat model: an honest-but-curious server. A server that publishes
// ill-formed reference ciphertexts (say Enc(2^k) for one unit and Enc(0)
// elsewhere) can read linear combinations of the client's values, e.g.
// σ_k,i² + μ_k,i² of one unit; guarding against that would need proofs that
// the reference is well formed, which this module does not provide. A
// client can make the server decrypt any divergence in the plausible range;
// DecryptDivergence only refuses gross forgeries and corruption.

namespace fedprof {

// Fixed-point scales, in bits after the binary point (see EncodeFixed).
// The server's values sit inside ciphertexts, where precision costs nothing;
// the client's values are exponents, where every bit costs a squaring mod n².
constexpr int kServerScaleBits = 128;  // w_i, w_i·μ_V,i
constexpr int kClientScaleBits = 96;   // σ_k,i² + μ_k,i², −2μ_k,i
// c_i, Σ −½·log σ_k,i² and the decrypted q·div.
constexpr int kDivergenceScaleBits = kServerScaleBits + kClientScaleBits;
// The decrypted sum has 3q + 1 terms, each below 2^(2·kMaxEncodedBits); up
// to 2^18 units keeps it within the 2^20 products EncodeFixed budgets for.
constexpr size_t kMaxSecureUnits = size_t{1} << 18;
// A decrypted divergence below −this is refused as not a divergence; honest
// rounding stays near 1e-18 in the accuracy envelope below.
constexpr double kMaxNegativeDivergence = 1e-9;

// Accuracy: every encoded value is computed exactly from the binary doubles
// and rounded once; the logs are taken in long double (64-bit mantissa on
// x86-64). The decrypted divergence then differs from the exact one of the
// given doubles by at most about (w_i + |w_i·μ_V,i|)·2^-97 per unit
// (≈1.6e-20 at w_i = 5e7, |μ_V,i| = 50), the other roundings being far
// smaller, plus the two logs' error (~1e-18). For means in [−50, 50] and
// variances in [kVarianceFloor, 1e4] that is ~1e-18 per unit: it matches
// Divergence() of profile.h within 1e-9 relative (tested), and is more
// accurate than it for nearly identical profiles, where Eq. 10 in double
// loses ~1e-16 to cancellation. Every value must also fit EncodeFixed's
// bound (|x|·2^scale < 2^kMaxEncodedBits): variances down to ~2^-370 and
// means up to ~2^100 are encodable; beyond that the functions throw.

// The server's encrypted reference for one model version: per unit, the
// ciphertexts (PaillierPublicKey::SerializeCiphertext) of w_i, w_i·μ_V,i
// and c_i.
struct SecureReference {
  int64_t version = 0;
  std::string layer;
  std::vector<std::string> w, w_mu, c;

  size_t units() const { return w.size(); }

  // "FPSR", format byte 1, version (8 bytes), layer length (4) and bytes,
  // units q (4), ciphertext length (4), then the q ciphertexts of w, of w_mu
  // and of c; integers big-endian: 25 + layer length + 3·q·ciphertext
  // length bytes in all.
  std::string Serialize() const;
  // Throws fedprof::Error naming the problem for anything Serialize would not
  // write with `key`: bad magic or format, truncation or trailing bytes,
  // q outside 1..kMaxSecureUnits, a ciphertext length other than the key's,
  // or an invalid ciphertext (named by field and unit).
  static SecureReference Parse(const std::string& bytes, const PaillierPublicKey& key);
};

// Server: encrypts `reference` under `key` (CRT encryption). Throws
// fedprof::Error if the reference is not a valid profile (CheckProfile) or a
// value is not encodable.
SecureReference EncryptReference(const PaillierSecretKey& key, const Profile& reference);

// Client: the serialised Enc(q·div(client, reference)) at kDivergenceScaleBits.
// Throws fedprof::Error, with the reason, if `client` does not match the
// reference (units, layer, version; CheckProfile), a reference ciphertext is
// invalid, or a value is not encodable. Reads nothing but public data.
std::string EncryptedDivergence(const PaillierPublicKey& key, const SecureReference& reference,
                                const Profile& client);

// Server: div(client, reference) from the client's ciphertext, for a
// reference of `units` units. Throws fedprof::Error if the ciphertext is
// invalid or decrypts to no plausible divergence: beyond what 3·units + 1
// encodable terms can sum to (a forged or corrupted ciphertext), or below
// −kMaxNegativeDivergence. Small negative rounding is returned as 0.
double DecryptDivergence(const PaillierSecretKey& key, const std::string& ciphertext, size_t units);

// Both sides of one matching run here, timed: what `fedprof divergence
// --secure` and the cost benchmark report. server_ms covers encrypting the
// reference (once per model version, shared by every client of a round)
// and decrypting the result (once per client); key_ms the key generation
// (once per run). bytes_to_client: the public key and the encrypted
// reference; bytes_to_server: the one ciphertext.
struct SecureMatchingRun {
  double divergence = 0;
  double key_ms = 0;
  double server_ms = 0;
  double client_ms = 0;
  int64_t bytes_to_client = 0;
  int64_t bytes_to_server = 0;
};
SecureMatchingRun RunSecureMatching(const Profile& client, const Profile& reference, int key_bits);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_SECURE_MATCHING_H_
