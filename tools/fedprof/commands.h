#ifndef FEDPROF_TOOLS_COMMANDS_H_
#define FEDPROF_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/monitor/monitor.h"

namespace fedprof::cli {

// Each subcommand registers its options on `app` and returns the function
// that runs it once parsing succeeded.
using Runner = std::function<void()>;

Runner AddSimulate(CLI::App& app);
Runner AddLaunch(CLI::App& app);
Runner AddCompare(CLI::App& app);
Runner AddProfile(CLI::App& app);
Runner AddPartition(CLI::App& app);
Runner AddDivergence(CLI::App& app);
Runner AddPrivacy(CLI::App& app);
Runner AddPayload(CLI::App& app);
Runner AddPretrain(CLI::App& app);
Runner AddFbftl(CLI::App& app);
Runner AddServer(CLI::App& app);
Runner AddClient(CLI::App& app);
Runner AddRelay(CLI::App& app);
Runner AddKeygen(CLI::App& app);
Runner AddFederation(CLI::App& app);
Runner AddNode(CLI::App& app);
Runner AddOptions(CLI::App& app);
Runner AddStatus(CLI::App& app);
// Hidden: fedprof help [--flags] (every command with its flags, for the docs' checker).
Runner AddHelp(CLI::App& app);

// --monitor, --monitor-token-file and --monitor-tls-dir (tools/fedprof/monitor.cc).
struct MonitorArgs {
  std::string listen;
  std::string token_file;
  std::string tls_dir;
};
void AddMonitorOptions(CLI::App* sub, MonitorArgs* args);
// The same options as arguments, for a command started by this one.
std::vector<std::string> MonitorArgv(const MonitorArgs& args);
// The monitor the arguments ask for (it serves until destroyed), or null
// without --monitor; `mode` is the command (simulate, compare, server). The
// command hands it to the run it starts as the run's observer.
std::unique_ptr<RunMonitor> StartMonitor(const MonitorArgs& args, const std::string& mode);
// The monitor's options the arguments ask for (listen empty without
// --monitor; its other flags need it: fedprof::Error).
MonitorOptions MonitorOptionsOf(const MonitorArgs& args, const std::string& mode);

// runs/<config stem>[-<kind>]-<local time>: where outputs go without --out.
std::string DefaultOutDir(const std::string& config_path, const std::string& kind = "");

}  // namespace fedprof::cli

#endif  // FEDPROF_TOOLS_COMMANDS_H_
