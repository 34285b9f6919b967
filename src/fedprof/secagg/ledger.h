#ifndef FEDPROF_SECAGG_LEDGER_H_
#define FEDPROF_SECAGG_LEDGER_H_

// The sessions a client has joined, so that it never joins one twice: a
// server that replays a session id would otherwise collect two sets of the
// client's messages under one id. With a file, the ledger outlives the
// client's process (one session id in hex a line, each appended before the
// client's first message of that session); without one it lives in memory,
// which suffices for a client whose signing key lives no longer than its
// process. Thread-safe.

#include <mutex>
#include <set>
#include <string>

#include "fedprof/secagg/crypto.h"

namespace fedprof::secagg {

class SessionLedger {
 public:
  // `path` "": in memory. The file is read at the first Join (a missing one
  // is empty).
  explicit SessionLedger(std::string path = "");

  // Records `session_id` (32 bytes) as joined. Throws fedprof::Error when it
  // was joined before, or the file cannot be read (a line that is not a
  // session id, naming the file and line) or written.
  void Join(const Bytes& session_id);

  const std::string& path() const { return path_; }

 private:
  void Load();  // mutex_ held

  const std::string path_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::set<Bytes> joined_;
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_LEDGER_H_
