#ifndef FEDPROF_CORE_DIGEST_H_
#define FEDPROF_CORE_DIGEST_H_

#include <string>

namespace fedprof {

// SHA-256 of `bytes` as 64 lower-case hex digits (OpenSSL's implementation).
std::string Sha256Hex(const std::string& bytes);

// SHA-256 of the file at `path`; throws fedprof::Error naming the path if it
// cannot be read.
std::string FileSha256Hex(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_CORE_DIGEST_H_
