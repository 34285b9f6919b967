#include "fedprof/secagg/ledger.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof::secagg {

SessionLedger::SessionLedger(std::string path) : path_(std::move(path)) {}

void SessionLedger::Load() {
  loaded_ = true;
  if (path_.empty() || !FileExists(path_)) return;
  std::istringstream lines(ReadFile(path_));
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    try {
      const Bytes id = HexDecode(line);
      if (id.size() != kKeyBytes) throw Error("not 64 hex digits");
      joined_.insert(id);
    } catch (const Error& e) {
      throw Error(path_ + " line " + std::to_string(number) + ": not a secure aggregation session id (" +
                  e.what() + ")");
    }
  }
}

void SessionLedger::Join(const Bytes& session_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_) Load();
  if (session_id.size() != kKeyBytes) throw Error("secagg: a session id is 32 bytes");
  if (joined_.count(session_id) != 0) {
    throw Error("secure aggregation session " + HexEncode(session_id).substr(0, 16) +
                "... was joined before: a server replaying a session");
  }
  if (!path_.empty()) {
    // One write of one whole line: appended atomically, so a crash leaves
    // every earlier line intact.
    const std::string line = HexEncode(session_id) + "\n";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    const bool written = fd >= 0 &&
                         ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                         ::fsync(fd) == 0;
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (!written) throw Error(path_ + ": cannot record the session joined: " + std::strerror(error));
  }
  joined_.insert(session_id);
}

}  // namespace fedprof::secagg
