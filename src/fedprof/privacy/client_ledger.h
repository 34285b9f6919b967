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
//   without noise is infinite. A deployed client under distributed DP keeps
//   kDefaultClientBudget unless its config sets another or, in words,
//   none (dp.client_unbounded);
// - a report (a task without training that asks for a loss, an evaluation
//   or a profile of its data, outside any sum) is counted, and refused past
//   the client's limits per run and over all runs. A report carries no
//   noise: the count, not an epsilon, is what bounds what crafted reference
//   models could read from it.
//
// A refusal says which rule, never how much of a budget or limit is left:
// the server learns that from the refusal no more than from a yes.
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
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
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

// A report task the client answered: the run id (32 bytes, or "" when the
// server stated none), its round, and what it asked ("profile", "loss",
// "evaluate", "divergence"; '+' between several).
struct ReportAnswer {
  std::string run;
  int64_t round = 0;
  std::string asked;
};

// The most reports a client answers in one run and over all runs; 0: no
// limit.
struct ReportLimits {
  int64_t per_run = 0;
  int64_t total = 0;
};

// A deployed client's budget under distributed DP when its config sets none
// (dp.client_budget = 0): epsilon against the server, over every run.
inline constexpr double kDefaultClientBudget = 10;

// The budget a deployed client keeps against the server (its ledger's; 0:
// none): dp.client_budget, or under dp.mode = distributed without one
// kDefaultClientBudget, unless dp.client_unbounded says none in words.
double DeployedClientBudget(const RunOptions::Dp& dp);

class ClientLedger {
 public:
  // `path` "": in memory. The file is read at the first use (a missing one
  // is empty). `delta` of the epsilons (> 0); `budget` > 0: the most epsilon
  // against the server the client spends over everything it contributes;
  // `reports`: the most reports it answers.
  ClientLedger(std::string path, double delta, double budget, ReportLimits reports = {});

  // Records `c` (on disk before this returns), or says in one line why the
  // client refuses it. Throws fedprof::Error when the file cannot be read
  // (naming the file and line) or written.
  std::string Take(const Contribution& c);
  // Records report `r` likewise, or says in one line why it is refused.
  std::string TakeReport(const ReportAnswer& r);

  struct Spent {
    int64_t contributions = 0;
    double against_server = 0;  // infinite once an update went without noise
    double against_observers = 0;
    int64_t reports = 0;
  };
  Spent spent() const;
  double budget() const { return budget_; }
  // "3 contributions: epsilon 1.2 against the server (of its budget 8), 0.9
  // against observers of the models, at delta 1e-05; 2 reports" (for the
  // client's own log).
  std::string Describe() const;

  const std::string& path() const { return path_; }

 private:
  void Load() const;  // mutex_ held
  // The contributions and reports of a ledger file's text, into made_ and
  // reported_.
  void Parse(const std::string& text) const;
  Spent SpentWith(const Contribution* more) const;  // mutex_ held
  // Why `c` is refused, or "" and its line. mutex_ held.
  std::string Decide(const Contribution& c, nlohmann::json* line);
  // Under the file's lock (when there is a file), with made_ and reported_
  // as every process of the client left them: `decide` says why the client
  // refuses, or "" and the JSON line it records, which is on disk before
  // this returns. mutex_ held.
  std::string Record(const std::function<std::string(nlohmann::json* line)>& decide);

  const std::string path_;
  const double delta_, budget_;
  const ReportLimits report_limits_;
  mutable std::mutex mutex_;
  mutable bool loaded_ = false;
  mutable std::vector<Contribution> made_;
  mutable std::vector<ReportAnswer> reported_;
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
