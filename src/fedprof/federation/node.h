#ifndef FEDPROF_FEDERATION_NODE_H_
#define FEDPROF_FEDERATION_NODE_H_

// A node of a federation (fedprof node): one process that stays connected
// and serves run after run, without restarting or registering anew with the
// federation. It syncs with the federation (proto/operator.proto, Nodes),
// checks each run it is offered against its own policy (policy.h), and
// serves each run it accepts as `fedprof client` would, on threads of its
// own, connected to that run's server: runs at once share the node's cores,
// each with its own data, model, tasks and secure-aggregation sessions;
// the node's keys and privacy ledger (beside them, in --tls-dir) are the
// same for every run, so a round is contributed to once and every run's
// spending is on one ledger. docs/federation.md.

#include <string>

namespace fedprof::federation {

struct NodeOptions {
  std::string server;  // the federation's HOST:PORT
  int id = -1;         // client id (its certificate's client-K), or the first of a range
  int last_id = -1;    // --ids A-B: clients A..B in this process
  std::string tls_dir;
  bool insecure = false;
  std::string policy_file;  // "" = every run is served
  std::string data_dir;     // the node's own data (one client), as `fedprof client --data-dir`
  std::string models_dir;   // where its copies of TorchScript modules are, found by SHA-256
  double give_up_s = 0;     // 0: keep trying to reach the federation
  bool fit_none = false;    // load tests only (fedprof client --fit none)
  std::string version;      // what it tells the federation it runs (fedprof --version)
  std::string build;
};

// Serves until SIGTERM or SIGINT, or until every one of its clients is
// refused for good (revoked, never enrolled: one line each), which throws
// fedprof::Error.
void RunNode(const NodeOptions& options);

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_NODE_H_
