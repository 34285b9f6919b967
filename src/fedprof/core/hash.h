#ifndef FEDPROF_CORE_HASH_H_
#define FEDPROF_CORE_HASH_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace fedprof {

// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto, which gRPC already links.
// Used for the checksums and config fingerprints of saved state: a
// cryptographic hash, so that no corruption or edit of a file slips through
// by chance. Thread-safe.
using Sha256Digest = std::array<uint8_t, 32>;
Sha256Digest Sha256(const std::string& bytes);

// The digest as 64 lower-case hex digits.
std::string Sha256Hex(const std::string& bytes);
std::string ToHex(const Sha256Digest& digest);

// SHA-256 over bytes given in pieces (large in-memory data), without
// joining them first. Not thread-safe.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(const void* data, size_t size);
  Sha256Digest Finish();

 private:
  struct Context;
  Context* context_;
};

// SHA-256 of the file at `path` as hex; throws fedprof::Error naming the
// path if it cannot be read.
std::string FileSha256Hex(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_CORE_HASH_H_
