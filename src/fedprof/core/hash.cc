#include "fedprof/core/hash.h"

#include <openssl/evp.h>

#include <memory>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof {

Sha256Digest Sha256(const std::string& bytes) {
  Sha256Digest digest{};
  unsigned int length = 0;
  // EVP_Digest is the one-shot form: no context to leak on any path.
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != digest.size()) {
    throw Error("sha256: OpenSSL's EVP_Digest failed");
  }
  return digest;
}

std::string ToHex(const Sha256Digest& digest) {
  return HexEncode(std::string(digest.begin(), digest.end()));
}

std::string Sha256Hex(const std::string& bytes) { return ToHex(Sha256(bytes)); }

struct Sha256Stream::Context {
  EVP_MD_CTX* md = nullptr;
};

Sha256Stream::Sha256Stream() : context_(new Context) {
  context_->md = EVP_MD_CTX_new();
  if (context_->md == nullptr || EVP_DigestInit_ex(context_->md, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(context_->md);
    delete context_;
    throw Error("sha256: OpenSSL's EVP_DigestInit_ex failed");
  }
}

Sha256Stream::~Sha256Stream() {
  EVP_MD_CTX_free(context_->md);
  delete context_;
}

void Sha256Stream::Update(const void* data, size_t size) {
  if (EVP_DigestUpdate(context_->md, data, size) != 1)
    throw Error("sha256: OpenSSL's EVP_DigestUpdate failed");
}

Sha256Digest Sha256Stream::Finish() {
  Sha256Digest digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->md, digest.data(), &length) != 1 || length != digest.size()) {
    throw Error("sha256: OpenSSL's EVP_DigestFinal_ex failed");
  }
  return digest;
}

std::string FileSha256Hex(const std::string& path) { return Sha256Hex(ReadFile(path)); }

}  // namespace fedprof
