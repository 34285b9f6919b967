#include "fedprof/secagg/crypto.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"

namespace fedprof::secagg {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

const unsigned char* U(const Bytes& b) { return reinterpret_cast<const unsigned char*>(b.data()); }
unsigned char* U(Bytes& b) { return reinterpret_cast<unsigned char*>(&b[0]); }

void CheckSize(const Bytes& b, size_t n, const char* what) {
  if (b.size() != n) {
    throw Error(std::string("secagg: ") + what + " of " + std::to_string(b.size()) +
                " bytes, expected " + std::to_string(n));
  }
}

KeyPair Generate(int type, const char* name) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    throw Error(std::string("secagg: could not generate an ") + name + " key");
  }
  Pkey key(raw);
  KeyPair pair{Bytes(kKeyBytes, '\0'), Bytes(kKeyBytes, '\0')};
  size_t secret_len = kKeyBytes, public_len = kKeyBytes;
  if (EVP_PKEY_get_raw_private_key(key.get(), U(pair.secret), &secret_len) != 1 ||
      EVP_PKEY_get_raw_public_key(key.get(), U(pair.public_key), &public_len) != 1 ||
      secret_len != kKeyBytes || public_len != kKeyBytes) {
    throw Error(std::string("secagg: could not read an ") + name + " key");
  }
  return pair;
}

Pkey PrivateKey(int type, const Bytes& secret) {
  CheckSize(secret, kKeyBytes, "private key");
  Pkey key(EVP_PKEY_new_raw_private_key(type, nullptr, U(secret), secret.size()));
  if (!key) throw Error("secagg: malformed private key");
  return key;
}

Pkey PublicKey(int type, const Bytes& public_key) {
  CheckSize(public_key, kKeyBytes, "public key");
  Pkey key(EVP_PKEY_new_raw_public_key(type, nullptr, U(public_key), public_key.size()));
  if (!key) throw Error("secagg: malformed public key");
  return key;
}

}  // namespace

Bytes RandomBytes(size_t n) {
  Bytes out(n, '\0');
  if (n > 0 && RAND_bytes(U(out), static_cast<int>(n)) != 1) {
    throw Error("secagg: the random generator failed");
  }
  return out;
}

KeyPair GenerateX25519() { return Generate(EVP_PKEY_X25519, "X25519"); }
KeyPair GenerateEd25519() { return Generate(EVP_PKEY_ED25519, "Ed25519"); }

Bytes X25519PublicOf(const Bytes& secret) {
  Pkey key = PrivateKey(EVP_PKEY_X25519, secret);
  Bytes out(kKeyBytes, '\0');
  size_t len = kKeyBytes;
  if (EVP_PKEY_get_raw_public_key(key.get(), U(out), &len) != 1 || len != kKeyBytes) {
    throw Error("secagg: could not derive an X25519 public key");
  }
  return out;
}

Bytes X25519Agree(const Bytes& secret, const Bytes& peer_public) {
  return X25519Agreement(secret).With(peer_public);
}

X25519Agreement::X25519Agreement(const Bytes& secret) : key_(PrivateKey(EVP_PKEY_X25519, secret).release()) {}

X25519Agreement::~X25519Agreement() { EVP_PKEY_free(key_); }

Bytes X25519Agreement::With(const Bytes& peer_public) const {
  Pkey peer = PublicKey(EVP_PKEY_X25519, peer_public);
  PkeyCtx ctx(EVP_PKEY_CTX_new(key_, nullptr));
  Bytes out(kKeyBytes, '\0');
  size_t len = kKeyBytes;
  // OpenSSL refuses an all-zero shared secret (a small-order peer key).
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), U(out), &len) != 1 || len != kKeyBytes) {
    throw Error("secagg: X25519 key agreement failed (a degenerate public key)");
  }
  return out;
}

Bytes Hkdf(const Bytes& ikm, const Bytes& info, size_t length) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  Bytes out(length, '\0');
  size_t len = length;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) != 1 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), U(ikm), static_cast<int>(ikm.size())) != 1 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), U(info), static_cast<int>(info.size())) != 1 ||
      EVP_PKEY_derive(ctx.get(), U(out), &len) != 1 || len != length) {
    throw Error("secagg: HKDF failed");
  }
  return out;
}

Bytes Seal(const Bytes& key, const Bytes& plaintext, const Bytes& aad) {
  CheckSize(key, kKeyBytes, "encryption key");
  Bytes out = RandomBytes(kNonceBytes);
  out.resize(SealedSize(plaintext.size()));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  unsigned char* body = U(out) + kNonceBytes;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key), U(out)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), body, &len, U(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), body + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          body + plaintext.size()) != 1) {
    throw Error("secagg: AES-GCM encryption failed");
  }
  return out;
}

Bytes Open(const Bytes& key, const Bytes& sealed, const Bytes& aad) {
  CheckSize(key, kKeyBytes, "encryption key");
  if (sealed.size() < kNonceBytes + kTagBytes) {
    throw Error("secagg: a ciphertext of " + std::to_string(sealed.size()) +
                " bytes is shorter than its nonce and tag");
  }
  const size_t n = sealed.size() - kNonceBytes - kTagBytes;
  Bytes out(n, '\0');
  Bytes tag = sealed.substr(kNonceBytes + n);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, U(key), U(sealed)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), n > 0 ? U(out) : nullptr, &len, U(sealed) + kNonceBytes,
                        static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, U(tag)) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), n > 0 ? U(out) + len : nullptr, &len) != 1) {
    throw Error("secagg: a ciphertext failed authentication");
  }
  return out;
}

Bytes Sign(const Bytes& secret, const Bytes& message) {
  Pkey key = PrivateKey(EVP_PKEY_ED25519, secret);
  MdCtx ctx(EVP_MD_CTX_new());
  Bytes out(kSignatureBytes, '\0');
  size_t len = kSignatureBytes;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), U(out), &len, U(message), message.size()) != 1 ||
      len != kSignatureBytes) {
    throw Error("secagg: Ed25519 signing failed");
  }
  return out;
}

namespace {

// The signatures this process has verified. The clients of one process (a
// simulation's, secagg/in_process.h, or a `fedprof client --ids` swarm's)
// check the same signatures, each of them: a client's key signatures by
// every neighbour, the U_3 signatures by every survivor. Only a triple
// OpenSSL accepted is kept, under the SHA-256 of its exact bytes (key and
// signature have fixed sizes, so the message follows them unambiguously),
// so a hit is a verification that succeeded; a triple that failed is
// checked again each time. Bounded: emptied at kMaxEntries.
class VerifiedSignatures {
 public:
  static VerifiedSignatures& Of() {
    static VerifiedSignatures* cache = new VerifiedSignatures;  // never destroyed: used at exit
    return *cache;
  }

  static std::string KeyOf(const Bytes& public_key, const Bytes& message, const Bytes& signature) {
    const Sha256Digest digest = Sha256(public_key + signature + message);
    return std::string(digest.begin(), digest.end());
  }

  bool Holds(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.count(key) != 0;
  }

  void Add(std::string key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.insert(std::move(key));
  }

 private:
  static constexpr size_t kMaxEntries = size_t{1} << 20;  // about 100 MB
  std::mutex mutex_;
  std::unordered_set<std::string> entries_;
};

bool VerifyWithOpenSsl(const Bytes& public_key, const Bytes& message, const Bytes& signature) {
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, U(public_key), kKeyBytes));
  if (!key) return false;
  MdCtx ctx(EVP_MD_CTX_new());
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) == 1 &&
         EVP_DigestVerify(ctx.get(), U(signature), signature.size(), U(message),
                          message.size()) == 1;
}

}  // namespace

bool Verify(const Bytes& public_key, const Bytes& message, const Bytes& signature) {
  if (public_key.size() != kKeyBytes || signature.size() != kSignatureBytes) return false;
  VerifiedSignatures& verified = VerifiedSignatures::Of();
  std::string key = VerifiedSignatures::KeyOf(public_key, message, signature);
  if (verified.Holds(key)) return true;
  if (!VerifyWithOpenSsl(public_key, message, signature)) return false;
  verified.Add(std::move(key));
  return true;
}

namespace {

// An AES-256-CTR context of the 32-byte `seed`, zero IV: its keystream.
CipherCtx CtrOf(const Bytes& seed) {
  CheckSize(seed, kKeyBytes, "PRG seed");
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  const unsigned char iv[16] = {0};
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_ctr(), nullptr, U(seed), iv) != 1) {
    throw Error("secagg: AES-CTR initialisation failed");
  }
  return ctx;
}

// The keystream's next `bytes` bytes: AES-CTR over zeros.
void NextKeystream(EVP_CIPHER_CTX* ctx, const std::vector<unsigned char>& zeros, unsigned char* out,
                   size_t bytes) {
  int len = 0;
  if (EVP_EncryptUpdate(ctx, out, &len, zeros.data(), static_cast<int>(bytes)) != 1 ||
      len != static_cast<int>(bytes)) {
    throw Error("secagg: AES-CTR keystream failed");
  }
}

}  // namespace

void AddPrg(const Bytes& seed, int sign, std::vector<Word>& out) {
  const CipherCtx ctx = CtrOf(seed);
  // The keystream comes in blocks of a few thousand words so that the
  // buffer stays in cache.
  constexpr size_t kBlock = 4096;
  std::vector<unsigned char> zeros(kBlock * sizeof(Word), 0), stream(kBlock * sizeof(Word));
  for (size_t at = 0; at < out.size(); at += kBlock) {
    const size_t n = std::min(kBlock, out.size() - at);
    NextKeystream(ctx.get(), zeros, stream.data(), n * sizeof(Word));
    for (size_t i = 0; i < n; ++i) {
      // Little-endian bytes to a word, whatever the host's order.
      Word w;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      std::memcpy(&w, &stream[i * 16], sizeof(w));
#else
      w = 0;
      for (int b = 15; b >= 0; --b) w = (w << 8) | stream[i * 16 + b];
#endif
      if (sign > 0) {
        out[at + i] += w;
      } else {
        out[at + i] -= w;
      }
    }
  }
}

namespace {
constexpr size_t kKeystreamWords = 1024;
}  // namespace

void Keystream::CtxFree::operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }

Keystream::Keystream(const Bytes& key)
    : ctx_(CtrOf(key).release()),
      zeros_(kKeystreamWords * sizeof(uint64_t), 0),
      bytes_(zeros_.size()),
      words_(kKeystreamWords),
      next_(kKeystreamWords) {}

uint64_t Keystream::Next() {
  if (next_ == words_.size()) {
    NextKeystream(ctx_.get(), zeros_, bytes_.data(), bytes_.size());
    for (size_t i = 0; i < words_.size(); ++i) {
      uint64_t w = 0;  // little-endian, whatever the host's order
      for (int b = 7; b >= 0; --b) w = (w << 8) | bytes_[i * 8 + static_cast<size_t>(b)];
      words_[i] = w;
    }
    next_ = 0;
  }
  return words_[next_++];
}

}  // namespace fedprof::secagg
