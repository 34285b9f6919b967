#ifndef FEDPROF_SECAGG_CRYPTO_H_
#define FEDPROF_SECAGG_CRYPTO_H_

// The primitives of secure aggregation, every one of them OpenSSL's (EVP):
// X25519 key agreement, HKDF-SHA256, AES-256-GCM, Ed25519 signatures and an
// AES-256-CTR keystream as the pseudorandom generator that expands a 32-byte
// seed into a mask. Nothing here is home-made; this file only fixes sizes,
// labels and error handling. Failures throw fedprof::Error.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/rng.h"

struct evp_pkey_st;        // OpenSSL's EVP_PKEY
struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace fedprof::secagg {

using Bytes = std::string;  // raw bytes
using Word = unsigned __int128;  // one element of Z_{2^128}
// 2^bits − 1 (bits 1..128): a word reduced modulo 2^bits is w & WordMask(bits).
inline Word WordMask(int bits) { return bits >= 128 ? ~Word{0} : (Word{1} << bits) - 1; }

constexpr size_t kKeyBytes = 32;        // X25519 keys, seeds, AES-256 keys
constexpr size_t kSignatureBytes = 64;  // Ed25519
constexpr size_t kNonceBytes = 12;      // AES-GCM
constexpr size_t kTagBytes = 16;        // AES-GCM

// `n` bytes from OpenSSL's CSPRNG.
Bytes RandomBytes(size_t n);

// An X25519 key pair (the KA.gen of Bonawitz et al., §3.3): 32-byte private
// and public keys.
struct KeyPair {
  Bytes secret;
  Bytes public_key;
};
KeyPair GenerateX25519();
// The public key of a 32-byte X25519 private key (to check a reconstructed
// key against the one its owner advertised).
Bytes X25519PublicOf(const Bytes& secret);
// KA.agree: the 32-byte shared secret of `secret` and `peer_public`. Throws
// on a malformed key or a degenerate (all-zero) result, which a small-order
// peer key produces.
Bytes X25519Agree(const Bytes& secret, const Bytes& peer_public);
// The same for one private key and many peers: the key is loaded once
// (loading it costs OpenSSL a scalar multiplication, as much as an
// agreement).
class X25519Agreement {
 public:
  explicit X25519Agreement(const Bytes& secret);
  ~X25519Agreement();
  X25519Agreement(const X25519Agreement&) = delete;
  X25519Agreement& operator=(const X25519Agreement&) = delete;
  Bytes With(const Bytes& peer_public) const;

 private:
  ::evp_pkey_st* key_;
};

// HKDF-SHA256 (RFC 5869) of `ikm` with the given `info`, no salt: `length`
// bytes of key material bound to their purpose.
Bytes Hkdf(const Bytes& ikm, const Bytes& info, size_t length = kKeyBytes);

// AE.enc / AE.dec: AES-256-GCM with a fresh random nonce; the output is
// nonce || ciphertext || tag, and `aad` is authenticated, not encrypted.
// Open throws on any size or authentication failure.
Bytes Seal(const Bytes& key, const Bytes& plaintext, const Bytes& aad);
Bytes Open(const Bytes& key, const Bytes& sealed, const Bytes& aad);
constexpr size_t SealedSize(size_t plaintext) { return kNonceBytes + plaintext + kTagBytes; }

// Ed25519 key pair and signatures (SIG of Bonawitz et al., Fig. 4).
KeyPair GenerateEd25519();
Bytes Sign(const Bytes& secret, const Bytes& message);
// Verify remembers the signatures it accepted in this process (crypto.cc),
// so that the many clients of one process verify each signature once.
bool Verify(const Bytes& public_key, const Bytes& message, const Bytes& signature);

// PRG: the AES-256-CTR keystream of the 32-byte `seed` (zero IV), read as
// little-endian 128-bit words, added to (sign +1) or subtracted from (sign -1)
// `out` modulo 2^128. Expanding straight into the accumulator keeps a
// client's and the server's memory at one vector however many masks they
// apply.
void AddPrg(const Bytes& seed, int sign, std::vector<Word>& out);

// The same keystream read as little-endian 64-bit words, a block at a time:
// random bits that whoever holds the 32-byte key can recompute and no one
// else can (DP noise, privacy/noise_source.h).
class Keystream final : public RandomBits {
 public:
  explicit Keystream(const Bytes& key);
  uint64_t Next() override;

 private:
  struct CtxFree {
    void operator()(::evp_cipher_ctx_st* ctx) const;
  };
  std::unique_ptr<::evp_cipher_ctx_st, CtxFree> ctx_;
  std::vector<unsigned char> zeros_, bytes_;  // one block of the keystream
  std::vector<uint64_t> words_;
  size_t next_;
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_CRYPTO_H_
