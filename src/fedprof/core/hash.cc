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

std::string FileSha256Hex(const std::string& path) { return Sha256Hex(ReadFile(path)); }

}  // namespace fedprof
