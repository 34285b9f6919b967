#ifndef FEDPROF_CORE_FILES_H_
#define FEDPROF_CORE_FILES_H_

#include <string>

namespace fedprof {

// Writes `contents` to `path` atomically: a temporary file in the same
// directory, flushed, then renamed over `path`. Readers see the old file or
// the new one, never a half-written one. With `sync` (the default) the file
// and the rename reach the disk before it returns, so a power loss leaves
// one of the two as well; without, only readers are served (files written
// by the thousand, which a later read checks). Throws fedprof::Error naming
// the path.
void WriteFileAtomic(const std::string& path, const std::string& contents, bool sync = true);

// Writes `contents` to the new file `path` with permissions `mode`, flushed
// to disk; an existing file is never replaced (the error says so), and a
// failed write leaves no file. Throws fedprof::Error naming the path.
void WriteNewFile(const std::string& path, const std::string& contents, unsigned mode);

// Appends `line` (its own newline included) to `path`, created with
// permissions `mode` if missing, in one write, flushed to disk: a crash
// leaves every earlier line whole. Throws fedprof::Error naming the path.
void AppendLine(const std::string& path, const std::string& line, unsigned mode);

// The whole file; throws fedprof::Error naming the path if it cannot be read.
std::string ReadFile(const std::string& path);

// Creates `dir` and its parents; throws fedprof::Error on failure.
void MakeDirs(const std::string& dir);

bool FileExists(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_CORE_FILES_H_
