#ifndef FEDPROF_FEDERATION_POLICY_H_
#define FEDPROF_FEDERATION_POLICY_H_

// A node's own rules for the runs it serves (fedprof node --policy FILE): a
// file on the node that no run can override. The node reads each run's
// config as the federation sends it and serves it only if every rule holds;
// a run it refuses gets one line naming the rule, in the node's log and in
// the run's status at the federation. docs/federation.md#a-nodes-policy.
//
//   [allow]                          # the run's value must be one of these
//   "strategy.name" = ["fedavg", "fedprof"]
//   "secagg.protocol" = ["secagg+"]  # secure aggregation required
//   "dp.mode" = ["distributed"]      # this node's own noise
//   "data.name" = ["fashion-mnist"]
//   [at_least]                       # numeric options, inclusive
//   "secagg.corrupt" = 0.05
//   [at_most]
//   "rounds" = 200
//   [limits]
//   min_cohort = 10        # clients a round: strategy.fraction × clients.count, rounded
//   max_epsilon = 4.0      # ε against the server's operator over the run (see below)
//   rounds_per_day = 50    # rounds each client trains a UTC day, over every run
//   [paths]
//   read = ["/srv/fl-data"] # where a run's config may name files (absolute; none: nowhere)
//   [client]                # the node's own terms, whatever a run says (NodeOwnOptions)
//   "dp.client_budget" = 4.0
//   "secagg.client_reports" = 100
//
// A run's config is the submitter's, not the node's: it may name files
// (data.dir, data.train_file, ...: config/paths.h) only under [paths] read,
// and a run's keys, key directory, budget and report cap are never taken
// (NodeClientConfig): they are the node's, from its --tls-dir and [client].
//
// max_epsilon bounds what the run's DP noise lets the server's operator
// learn of this node's updates: the Gaussian mechanism of dp.noise_multiplier
// over every round of the run, as if the node took part in each, without
// amplification by sampling (the operator knows whom it sampled), at the
// run's δ. A run without DP noise of the clients' own (dp.mode other than
// distributed) gives the operator every update: ε is infinite.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/config/config.h"

namespace fedprof::federation {

struct NodePolicy {
  std::string file;  // where it was read, "" = none: every run is served
  std::map<std::string, std::vector<std::string>> allow;
  std::map<std::string, double> at_least;
  std::map<std::string, double> at_most;
  int64_t min_cohort = 0;
  double max_epsilon = 0;  // 0 = no bound
  int64_t rounds_per_day = 0;  // 0 = no bound
  std::vector<std::string> read_roots;       // [paths] read
  std::map<std::string, std::string> own;    // [client]: option -> canonical value
};

// The options a node's clients hold as their own under any run: its
// privacy budget (dp.client_budget, dp.client_unbounded), the delta its
// ledger prices every contribution at (dp.delta), and its cap on the
// reports it answers (secagg.client_reports).
const std::vector<std::string>& NodeOwnOptions();

// A node's ledger's delta without a [client] "dp.delta" of its policy.
inline constexpr const char* kNodeDelta = "1e-05";

// The config node clients run `run` under: the run's, with every option of
// NodeOwnOptions the policy's [client] value (or its default: a run never
// sets it; the budget and delta only under dp.mode = distributed, the one
// mode that keeps one; else dp.delta's kNodeDelta) and dp.key_dir empty (the node's --tls-dir holds its keys).
Config NodeClientConfig(const NodePolicy& policy, Config run);

// Reads a policy; throws fedprof::Error naming the file and the key that is
// wrong (an unknown option, a value of the wrong type, a table that is no
// rule), so that a policy that does not say what its writer meant never
// serves anything.
NodePolicy LoadPolicy(const std::string& path);

// "" when `run` meets every rule, else the first rule it breaks and how, in
// one line: "policy allow \"secagg.protocol\" = [secagg+]: the run has none".
std::string PolicyRefusal(const NodePolicy& policy, const Config& run);

// ε against the server's operator of `run` (see above); infinity without
// distributed DP.
double EpsilonAgainstTheServer(const Config& run);

// The training rounds each of a node's clients has taken in the current UTC
// day, over every run it serves, against rounds_per_day: counted in
// `dir`/client-K.rounds ("YYYY-MM-DD N"), so that a restarted node does not
// begin the day again. A round is counted as its task is taken, whether or
// not its result arrives. Thread-safe (runs at once share it).
class RoundsPerDay {
 public:
  RoundsPerDay(std::string dir, int64_t per_day) : dir_(std::move(dir)), per_day_(per_day) {}

  // "" with one more round counted for client `id` when it has one left on
  // `day` (YYYY-MM-DD; empty: today, UTC), else the rule in one line. A
  // count file it cannot read or write refuses too, naming the file.
  std::string Take(int id, const std::string& day = "");

 private:
  std::mutex mutex_;
  const std::string dir_;
  const int64_t per_day_;
};

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_POLICY_H_
