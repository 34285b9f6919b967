#ifndef FEDPROF_PRIVACY_CLIENT_LEDGER_H_
#define FEDPROF_PRIVACY_CLIENT_LEDGER_H_

// What a deployed client has contributed to secure sums, kept on its own
// machine, so that it never gives the server a second look at its data for
// free and knows what it has spent:
//
// - a session it joined is never joined again (a replayed session);
// - a round of a run is contributed to once, and never after a later round
//   of that run (a round run again, with train.lr = 0 to isolate the noise,
//   or a run going back);
// - a task (protocol/wire.h's TaskDigest: the model and everything that
//   shapes the update) is contributed to once, whatever run or session it
//   comes in: a keyed client's noise is the key's for the task, so a second
//   contribution would carry the same noise;
// - its epsilon against the server never passes its own budget (an option
//   of the client's): each contribution under distributed DP is charged
//   without amplification (the server knows who is in each sum) with the
//   noise of the fewest honest clients the session's sum may hold; one
//   without noise is infinite.
//
// The ledger also states epsilon against observers of the released models
// (the noise of all the clients in the sum, again without amplification:
// the client cannot check the server's sampling).
//
// One contribution a line (JSON), appended and flushed to disk before the
// client sends anything of it, so a restart keeps every rule; the file is
// locked (flock) and read again for each contribution, so two processes of
// one client keep them too. A last line cut short by a crash is ignored:
// nothing of its contribution was sent. Without a file it lives in memory.
// Thread-safe.

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/privacy/distributed_dp.h"

namespace fedprof {

struct Contribution {
  std::string run;  // the run id (32 bytes) of the session
  int64_t round = 0;
  std::string session;  // the session id (32 bytes)
  std::string task;     // the task's digest (TaskDigest)
  // Distributed DP: the release the contribution joins, with the fewest
  // clients and honest clients its sum may hold. None: its update goes into
  // the sum without noise.
  std::optional<DdgRelease> release;
};

class ClientLedger {
 public:
  // `path` "": in memory. The file is read at the first use (a missing one
  // is empty). `delta` of the epsilons (> 0); `budget` > 0: the most epsilon
  // against the server the client spends over everything it contributes.
  ClientLedger(std::string path, double delta, double budget);

  // Records `c` (on disk before this returns), or says in one line why the
  // client refuses it. Throws fedprof::Error when the file cannot be read
  // (naming the file and line) or written.
  std::string Take(const Contribution& c);

  struct Spent {
    int64_t contributions = 0;
    double against_server = 0;  // infinite once an update went without noise
    double against_observers = 0;
  };
  Spent spent() const;
  double budget() const { return budget_; }
  // "3 contributions: epsilon 1.2 against the server (of its budget 8), 0.9
  // against observers of the models, at delta 1e-05".
  std::string Describe() const;

  const std::string& path() const { return path_; }

 private:
  void Load() const;  // mutex_ held
  // The contributions of a ledger file's text.
  std::vector<Contribution> Parse(const std::string& text) const;
  Spent SpentWith(const Contribution* more) const;  // mutex_ held

  const std::string path_;
  const double delta_, budget_;
  mutable std::mutex mutex_;
  mutable bool loaded_ = false;
  mutable std::vector<Contribution> made_;
};

// Client `id`'s ledger in a directory of its keys.
std::string ClientLedgerPath(const std::string& dir, int64_t id);

// What a ledger file says, for `fedprof status`: its contributions (the
// rounds of each run), and what they spent at the delta and budget the
// client last ran with (each line keeps them). Throws fedprof::Error naming
// the file for one that is not a ledger.
nlohmann::json ClientLedgerStatus(const std::string& path);
std::string FormatClientLedgerStatus(const nlohmann::json& status);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_CLIENT_LEDGER_H_
