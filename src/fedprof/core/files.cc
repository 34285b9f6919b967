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

void WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string reason = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(path + ": cannot write: " + reason);
    }
    done += static_cast<size_t>(n);
  }
  // fsync so that a crash after the rename cannot expose an empty file.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot write: " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw Error(path + ": cannot replace: " + reason);
  }
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
