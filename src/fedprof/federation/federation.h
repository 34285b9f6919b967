#ifndef FEDPROF_FEDERATION_FEDERATION_H_
#define FEDPROF_FEDERATION_FEDERATION_H_

// A federation that outlives its runs (fedprof federation serve): one port
// for its nodes (Nodes) and its operators (Operator), proto/operator.proto;
// its runs, each a `fedprof server` on a port of its own
// (run_supervisor.h); and its state (store.h) in --state DIR, which a
// restart takes up again. docs/federation.md.

#include <string>
#include <vector>

#include "fedprof/monitor/monitor.h"

namespace fedprof::federation {

struct FederationOptions {
  std::string state_dir;
  std::string listen = "127.0.0.1:50050";  // HOST:PORT for nodes and operators (port 0: any)
  // ca.crt, server.crt, server.key (scripts/make-certs.sh): operators
  // present operator-<name> certificates, nodes client-<k> ones.
  std::string tls_dir;
  bool insecure = false;   // loopback experiments only: no roles can be told apart
  int first_run_port = 0;  // --run-ports A-B: where runs' servers listen (0: any free port)
  int last_run_port = 0;
  int max_runs = 4;        // at once
  double stop_grace_s = 60;
  // The directories a run's config may name files in (data.dir,
  // data.train_file, ...: config/paths.h); none: a run reads only the data
  // sets at their default locations.
  std::vector<std::string> data_roots;
  // The operators (operator-<name>) who enrol and revoke nodes, read the
  // audit log, and read and stop every run; any other operator reads and
  // stops only the runs it submitted.
  std::vector<std::string> admins;
  MonitorOptions monitor;  // listen empty: no monitor (federation_monitor.h)
};

// Serves until SIGTERM or SIGINT; prints "federation: listening on HOST:PORT"
// once it does (and "federation: monitor on URL" with a monitor). Throws
// fedprof::Error (one line) when it cannot start.
void ServeFederation(const FederationOptions& options);

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_FEDERATION_H_
