#include "fedprof/core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fedprof/core/error.h"

namespace fedprof {

namespace {

// The directory holding `path` ("." for a bare name).
std::string DirectoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void WriteFileAtomic(const std::string& path, const std::string& contents, bool sync) {
  const std::string tmp = path + ".tmp";
  // Every failure below removes the temporary file and leaves `path` as it
  // was: the previous contents or nothing.
  auto fail = [&](int fd, const char* what, int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot " + what + ": " + std::strerror(error));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    // A write that makes no progress (n == 0) would loop forever.
    if (n <= 0) fail(fd, "write", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  // fsync so that a crash after the rename cannot expose an empty file; a
  // full disk may only show here (delayed allocation) or at close.
  if (sync && ::fsync(fd) != 0) fail(fd, "write (fsync)", errno);
  if (::close(fd) != 0) fail(-1, "write (close)", errno);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(-1, "replace", errno);
  if (!sync) return;
  // Make the rename itself durable. Some file systems refuse fsync on a
  // directory (EINVAL); the file is complete either way.
  const int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void WriteNewFile(const std::string& path, const std::string& contents, unsigned mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) {
    if (errno == EEXIST) throw Error(path + ": exists already; it is never replaced (move it away first)");
    throw Error(path + ": cannot be created: " + std::strerror(errno));
  }
  const bool written =
      ::write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size()) &&
      ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    throw Error(path + ": could not be written");
  }
}

void AppendLine(const std::string& path, const std::string& line, unsigned mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, static_cast<mode_t>(mode));
  const bool written = fd >= 0 &&
                       ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::fsync(fd) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written) throw Error(path + ": cannot be appended to: " + std::strerror(error));
}

std::string ReadFile(const std::string& path) {
  // A directory opens as a stream on Linux but has no meaningful contents.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(path + ": is a directory, expected a file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file: " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(path + ": cannot determine the file size");
  in.seekg(0, std::ios::beg);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(bytes.data(), size)) {
    throw Error(path + ": read error after byte " + std::to_string(in.gcount()) + " of " +
                std::to_string(size));
  }
  return bytes;
}

void MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create directory: " + ec.message());
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace fedprof
