// fedprof simulate: one simulated federated training run.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/distributed/rank_group.h"
#include "fedprof/run/simulation.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

struct SimulateArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  std::string resume;
  bool overwrite = false;
  MonitorArgs monitor;
};

}  // namespace

std::string DefaultOutDir(const std::string& config_path, const std::string& kind) {
  std::string stem = config_path.empty() ? "default" : config_path;
  stem = stem.substr(stem.rfind('/') == std::string::npos ? 0 : stem.rfind('/') + 1);
  stem = stem.substr(0, stem.rfind(".toml"));
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + stem + (kind.empty() ? "" : "-" + kind) + "-" + stamp;
}

Runner AddSimulate(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* sub = app.add_subcommand("simulate", "Simulate federated training of N clients");
  sub->add_option("--config", args->config, "Experiment config (TOML)");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--out", args->out, "Output directory (default runs/<config>-<time>)");
  CLI::Option* resume =
      sub->add_option("--resume", args->resume, "Continue the killed run in this output directory");
  sub->add_flag("--overwrite", args->overwrite, "Replace the run already in --out (refused without it)")
      ->excludes(resume);
  AddMonitorOptions(sub, &args->monitor);
  sub->footer(
      "Every option: fedprof options\n"
      "Distributed (torchrun environment: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK): rank 0 runs\n"
      "the server and writes the outputs; see fedprof launch.");
  return [args] {
    // A rank > 0 of a distributed run takes the config from rank 0: it reads
    // no --config file, no --resume folder and writes no --out (a --set of
    // dist.timeout_s bounds its wait for the others).
    const DistEnv env = ReadDistEnv();
    if (env.distributed() && env.rank > 0) {
      Config given;
      for (const auto& s : args->sets) given.SetAssignment(s);
      RunSimulationWorker(given.options().dist.timeout_s);
      return;
    }
    const std::unique_ptr<RunMonitor> monitor = StartMonitor(args->monitor, "simulate");
    if (!args->resume.empty()) {
      if (!args->config.empty() || !args->out.empty()) {
        throw Error("--resume DIR: takes its config from DIR; drop --config and --out");
      }
      ResumeSimulation(args->resume, args->sets, monitor.get());
      std::printf("outputs in %s\n", args->resume.c_str());
      return;
    }
    Config config = Config::Load(args->config, args->sets);
    const std::string out = args->out.empty() ? DefaultOutDir(args->config) : args->out;
    RunSimulation(config, out, monitor.get(), args->overwrite ? ExistingRun::kReplace : ExistingRun::kRefuse);
    std::printf("outputs in %s (metrics.csv, clients.csv, summary.json, config.toml)\n",
                out.c_str());
  };
}

Runner AddOptions(CLI::App& app) {
  struct OptionsArgs {
    bool names = false;
    bool resumable = false;
  };
  auto args = std::make_shared<OptionsArgs>();
  CLI::App* sub = app.add_subcommand("options", "Print every config option as a Markdown table");
  // For scripts (scripts/docs.py checks --set keys and writes docs/options.md
  // from these), so that they keep no copy of the table.
  CLI::Option* names = sub->add_flag("--names", args->names, "Only the options' names, one a line");
  sub->add_flag("--resumable", args->resumable,
                "Only the options a resumed run may change, on one line")
      ->excludes(names);
  return [args] {
    if (args->names) {
      for (const auto& o : AllOptions()) std::printf("%s\n", o.name);
    } else if (args->resumable) {
      std::printf("%s\n", ResumableOptionsList().c_str());
    } else {
      std::fputs(OptionsMarkdown().c_str(), stdout);
    }
  };
}

}  // namespace fedprof::cli
