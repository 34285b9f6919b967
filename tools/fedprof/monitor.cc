// --monitor on the commands that run rounds, and fedprof status: a running
// run's /status, or a run directory's summary.
#include "fedprof/monitor/monitor.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/federation/listing.h"
#include "fedprof/monitor/http.h"
#include "fedprof/privacy/client_ledger.h"
#include "fedprof/report/run_status.h"
#include "fedprof/run/run_dir.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {

void AddMonitorOptions(CLI::App* sub, MonitorArgs* args) {
  sub->add_option("--monitor", args->listen,
                  "Serve /metrics (Prometheus), /status and a live dashboard on HOST:PORT "
                  "(loopback unless told otherwise; port 0: any free port)");
  sub->add_option("--monitor-token-file", args->token_file,
                  "A bearer token every /metrics and /status request must bring (required off "
                  "loopback)");
  sub->add_option("--monitor-tls-dir", args->tls_dir,
                  "Serve the monitor over HTTPS with this directory's server.crt and server.key");
}

std::vector<std::string> MonitorArgv(const MonitorArgs& args) {
  std::vector<std::string> out;
  if (args.listen.empty()) return out;
  out = {"--monitor", args.listen};
  if (!args.token_file.empty()) out.insert(out.end(), {"--monitor-token-file", args.token_file});
  if (!args.tls_dir.empty()) out.insert(out.end(), {"--monitor-tls-dir", args.tls_dir});
  return out;
}

MonitorOptions MonitorOptionsOf(const MonitorArgs& args, const std::string& mode) {
  if (args.listen.empty() && (!args.token_file.empty() || !args.tls_dir.empty())) {
    throw Error("--monitor-token-file and --monitor-tls-dir need --monitor HOST:PORT");
  }
  MonitorOptions options;
  options.listen = args.listen;
  options.token_file = args.token_file;
  options.tls_dir = args.tls_dir;
  options.mode = mode;
  return options;
}

std::unique_ptr<RunMonitor> StartMonitor(const MonitorArgs& args, const std::string& mode) {
  const MonitorOptions options = MonitorOptionsOf(args, mode);
  if (options.listen.empty()) return nullptr;
  return std::make_unique<RunMonitor>(options);
}

namespace {

// A federation's monitor's /status: its runs and its nodes, as `federation
// runs` and `federation nodes` print them.
std::string FormatFederationStatus(const nlohmann::json& status, const std::string& target) {
  try {
    return "federation at " + target + "\n\nruns:\n" + federation::FormatRuns(status.at("runs")) +
           "\nnodes:\n" + federation::FormatNodes(status.at("nodes"));
  } catch (const nlohmann::json::exception&) {
    throw Error("status: " + target + "/status is not a federation's status");
  }
}

}  // namespace

Runner AddStatus(CLI::App& app) {
  struct Args {
    std::string target;
    bool json = false;
    std::string token_file;
    std::string ca_file;
    double timeout_s = 5;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "status",
      "A run's status: a running one's (--monitor HOST:PORT) or a run directory's; or what a "
      "deployed client has spent (its ledger, client-K.ledger beside its keys)");
  sub->add_option("target", args->target, "HOST:PORT of a --monitor, a run directory, or a client's ledger")
      ->required();
  sub->add_flag("--json", args->json, "Print JSON");
  sub->add_option("--token-file", args->token_file, "The monitor's bearer token");
  sub->add_option("--ca-file", args->ca_file,
                  "HTTPS: check the monitor's certificate against this CA (ca.crt)");
  sub->add_option("--timeout", args->timeout_s, "Seconds to wait for the monitor")
      ->capture_default_str();
  return [args] {
    if (std::filesystem::is_directory(args->target)) {
      const nlohmann::json status = RunDirStatus(args->target);
      std::fputs(args->json ? (status.dump(2) + "\n").c_str() : FormatRunDirStatus(status).c_str(),
                 stdout);
      return;
    }
    if (std::filesystem::is_regular_file(args->target)) {
      const nlohmann::json status = ClientLedgerStatus(args->target);
      std::fputs(args->json ? (status.dump(2) + "\n").c_str() : FormatClientLedgerStatus(status).c_str(),
                 stdout);
      return;
    }
    if (args->target.find(':') == std::string::npos) {
      throw Error("status: '" + args->target +
                  "' is neither a run directory, a client's ledger nor HOST:PORT");
    }
    std::string token;
    if (!args->token_file.empty()) {
      if (!FileExists(args->token_file)) {
        throw Error("--token-file " + args->token_file + ": no such file");
      }
      token = ReadFile(args->token_file);
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    }
    const std::string body = MonitorGet(args->target, "/status", token, args->ca_file, args->timeout_s);
    nlohmann::json status;
    try {
      status = nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception&) {
      throw Error("status: " + args->target + "/status is not JSON");
    }
    if (args->json) {
      std::fputs((status.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str(), stdout);
    } else if (status.is_object() && status.contains("federation")) {
      std::fputs(FormatFederationStatus(status, args->target).c_str(), stdout);
    } else {
      std::fputs(FormatMonitorStatus(status).c_str(), stdout);
    }
  };
}

}  // namespace fedprof::cli
