#ifndef FEDPROF_SECAGG_SHAMIR_H_
#define FEDPROF_SECAGG_SHAMIR_H_

// Shamir's t-of-n secret sharing (SS.share / SS.recon of Bonawitz et al.,
// §3.1) of 32-byte secrets over the prime field F_p, p = 2^257 − 93, the
// smallest prime below 2^257 and so above every 256-bit secret. A share is
// the point (x, f(x)) of a random polynomial f of degree t − 1 with
// f(0) = secret; x is the holder's client id + 1 (never 0). Coefficients come
// from OpenSSL's CSPRNG; the arithmetic is GMP's.

#include <cstdint>
#include <map>
#include <vector>

#include "fedprof/secagg/crypto.h"

namespace fedprof::secagg {

constexpr size_t kShareBytes = 33;  // f(x) < p < 2^257, big-endian

struct Share {
  int64_t holder = 0;  // client id; x = holder + 1
  Bytes value;         // kShareBytes, big-endian, < p
};

// Shares of `secret` (32 bytes) for `holders` (distinct ids >= 0), any
// `threshold` of which reconstruct it. Throws fedprof::Error on bad sizes
// or a threshold outside 1..holders.size().
std::vector<Share> ShareSecret(const Bytes& secret, int threshold,
                               const std::vector<int64_t>& holders);

// The secret of exactly `threshold` shares (Lagrange interpolation at 0).
// Throws fedprof::Error on fewer shares, duplicate holders, a value that is
// not a field element, or a result of more than 256 bits (which no honest
// set of shares gives). Whether the secret is the right one is for the
// caller to check against what it committed to.
Bytes Reconstruct(const std::vector<Share>& shares, int threshold);

// Reconstructs many secrets, computing the Lagrange coefficients of each set
// of holders once: a server recovering every survivor's self mask from the
// same answering clients pays O(t^2) once and O(t) per secret.
class Reconstructor {
 public:
  Bytes Reconstruct(const std::vector<Share>& shares, int threshold);

 private:
  // λ_i = Π_{j≠i} x_j / (x_j − x_i) mod p, big-endian, by holder list.
  std::map<std::vector<int64_t>, std::vector<Bytes>> coefficients_;
};

// Whether `share` lies on the polynomial through `basis` (threshold shares):
// how extra shares are checked once a reconstruction is verified.
bool OnPolynomial(const std::vector<Share>& basis, const Share& share);

// Whether p is prime (GMP's Miller–Rabin, 50 rounds): a test's check of
// the constant.
bool FieldPrimeIsPrime();

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_SHAMIR_H_
