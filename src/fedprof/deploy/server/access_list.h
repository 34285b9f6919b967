#ifndef FEDPROF_DEPLOY_SERVER_ACCESS_LIST_H_
#define FEDPROF_DEPLOY_SERVER_ACCESS_LIST_H_

// A federation's word on its nodes (fedprof federation serve writes it,
// each of its runs' servers reads it, `fedprof server --access FILE`): the
// certificate each enrolled client id is served under, and the ids revoked.
// A client is then served only under the certificate it was enrolled with
// (a re-keyed node's old key is refused) and not at all once revoked; an
// id never enrolled is refused too. Without a file every certificate of the
// CA is served, as before federations.
//
// The file is JSON, {"enrolled": {"3": "<sha256 of the DER>", ...},
// "revoked": {"5": "by operator-alice at 2026-...: its key leaked", ...}},
// replaced whole (WriteAccessList); a server reads it again when it has
// changed, at most once a second, so a revocation reaches every run's next
// call within a heartbeat.

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace fedprof::deploy {

struct AccessEntries {
  std::map<int, std::string> enrolled;  // id -> certificate SHA-256 (hex)
  std::map<int, std::string> revoked;   // id -> by whom, when and why
};

// Throws fedprof::Error naming the file when it cannot be read or parsed.
AccessEntries ReadAccessList(const std::string& path);
// Atomically (a reader sees the old list or the new one).
void WriteAccessList(const std::string& path, const AccessEntries& entries);

class AccessList {
 public:
  // `path` empty: everyone the CA certified.
  explicit AccessList(std::string path);

  bool empty() const { return path_.empty(); }

  // "" when client `id`, presenting the certificate of fingerprint
  // `cert_sha256`, may call; else why not, in one line. A list that cannot
  // be read refuses everyone (and says so) until it can.
  std::string Refusal(int id, const std::string& cert_sha256);

 private:
  void Refresh();  // mutex held

  const std::string path_;
  std::mutex mutex_;
  AccessEntries entries_;
  std::string problem_;
  std::chrono::steady_clock::time_point checked_{};
  bool read_once_ = false;
  std::string stamp_;  // the file's inode, size and time when read
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_ACCESS_LIST_H_
