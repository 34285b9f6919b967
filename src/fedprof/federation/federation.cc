#include "fedprof/federation/federation.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>

#include "fedprof/config/paths.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/federation/federation_monitor.h"
#include "fedprof/federation/federation_state.h"
#include "fedprof/federation/listing.h"
#include "fedprof/federation/node_service.h"
#include "fedprof/federation/operator_service.h"
#include "fedprof/federation/run_supervisor.h"
#include "fedprof/federation/store.h"

namespace fedprof::federation {
namespace {

// The largest message of the port: a submission's model chunk and its
// framing (every other message is bounded smaller by its handler).
constexpr int kMessageLimit = (1 << 20) + 64 * 1024;

std::string SelfPath() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw Error("federation: cannot find its own executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

// Who may reach it and what they may do: mutual TLS, or plaintext on
// loopback; --admin names operators as their certificates do, and without
// one no operator can enrol a node.
void CheckAccess(const FederationOptions& options) {
  if (options.insecure == !options.tls_dir.empty()) {
    throw Error("--tls-dir DIR (mutual TLS; scripts/make-certs.sh writes DIR) or --insecure "
                "(plaintext, loopback only): give exactly one");
  }
  if (options.insecure && !IsLoopbackAddress(options.listen)) {
    throw Error("--listen " + options.listen + ": --insecure is for loopback addresses only; use --tls-dir");
  }
  if (options.insecure) {
    LogWarning("--insecure: NO TLS. Anyone who can reach " + options.listen +
               " can act as any node or operator. For loopback experiments only.");
  }
  for (const std::string& admin : options.admins) {
    if (!IsOperatorName(admin)) {
      throw Error("--admin '" + Printable(admin, 40) +
                  "': the NAME of an operator-NAME certificate (1 to 32 of a-z 0-9 - _)");
    }
  }
  // A run may read its roots: none may hold the federation's own state or keys.
  for (const std::string& root : options.data_roots) {
    for (const std::string& own : {options.state_dir, options.tls_dir}) {
      if (!own.empty() && (InsideRoots(own, {root}) || InsideRoots(root, {own}))) {
        throw Error("--data-root " + Printable(root, 200) + ": holds or lies in the federation's " + own +
                    ", which no run may read");
      }
    }
  }
  if (!options.insecure && options.admins.empty()) {
    LogWarning("no --admin: no operator may enrol or revoke a node, read the audit log, or read or stop "
               "another's run");
  }
}

}  // namespace

void ServeFederation(const FederationOptions& options) {
  if (options.state_dir.empty()) throw Error("federation serve: give --state DIR (where it keeps its runs)");
  CheckAccess(options);
  // SIGTERM and SIGINT end it, read by this thread alone (sigwait): every
  // thread made from here on blocks them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Store store(options.state_dir);
  FederationState state(options, &store);
  RunHost host;
  host.fedprof = SelfPath();
  host.state_dir = options.state_dir;
  host.host = options.listen.substr(0, options.listen.rfind(':'));
  host.first_port = options.first_run_port;
  host.last_port = options.last_run_port;
  host.tls_dir = options.tls_dir;
  host.insecure = options.insecure;
  host.max_runs = options.max_runs;
  host.stop_grace_s = options.stop_grace_s;
  host.data_roots = options.data_roots;
  NodeService nodes(&state);
  RunSupervisor runs(&store, host, [&state] { state.Changed(); });
  OperatorService operators(&state, &runs);
  std::unique_ptr<FederationMonitor> monitor;
  if (!options.monitor.listen.empty()) {
    FederationView view;
    view.runs = [&operators] {
      nlohmann::json all = nlohmann::json::array();
      const pb::RunList list = operators.AllRuns();
      for (const pb::RunInfo& run : list.runs()) all.push_back(RunJson(run));
      return all;
    };
    view.nodes = [&operators] {
      nlohmann::json all = nlohmann::json::array();
      const pb::NodeList list = operators.AllNodes();
      for (const pb::NodeInfo& node : list.nodes()) all.push_back(NodeJson(node));
      return all;
    };
    monitor = std::make_unique<FederationMonitor>(options.monitor, std::move(view));
  }

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, ServerCredentials(options.tls_dir), &port);
  builder.RegisterService(&nodes);
  builder.RegisterService(&operators);
  builder.SetMaxReceiveMessageSize(kMessageLimit);
  builder.SetMaxSendMessageSize(kMessageLimit);
  // A connection carries a node's sync and an operator's few calls at once.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 8);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    throw Error("--listen " + options.listen + ": cannot listen there (in use, or not an address of this machine)");
  }
  state.Changed();
  const std::string address = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
  LogProgress("federation: listening on " + address + (options.insecure ? " (INSECURE)" : " (mutual TLS)") +
              "; state in " + options.state_dir);
  if (monitor) LogProgress("federation: monitor on " + monitor->url());
  int signal = 0;
  sigwait(&stop_signals, &signal);
  LogProgress(std::string("federation: stopping (") + ::strsignal(signal) +
              "); its runs go on from their checkpoints when it starts again");
  nodes.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
}

}  // namespace fedprof::federation
