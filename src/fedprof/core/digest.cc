#include "fedprof/core/digest.h"

#include <openssl/evp.h>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"

namespace fedprof {

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    throw Error("SHA-256: OpenSSL failed to compute a digest");
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

std::string FileSha256Hex(const std::string& path) { return Sha256Hex(ReadFile(path)); }

}  // namespace fedprof
