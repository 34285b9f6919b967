#ifndef FEDPROF_CORE_FILES_H_
#define FEDPROF_CORE_FILES_H_

#include <string>

namespace fedprof {

// Writes `contents` to `path` atomically: a temporary file in the same
// directory, flushed, then renamed over `path`. Readers see the old file or
// the new one, never a half-written one. Throws fedprof::Error naming the path.
void WriteFileAtomic(const std::string& path, const std::string& contents);

// The whole file; throws fedprof::Error naming the path if it cannot be read.
std::string ReadFile(const std::string& path);

// Creates `dir` and its parents; throws fedprof::Error on failure.
void MakeDirs(const std::string& dir);

bool FileExists(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_CORE_FILES_H_
