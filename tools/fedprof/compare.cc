// fedprof compare: several strategies on the same clients and seeds.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/distributed/rank_group.h"
#include "fedprof/run/comparison.h"
#include "tools/fedprof/commands.h"

extern char** environ;

namespace fedprof::cli {
namespace {

// Runs `runs` as `jobs` concurrent `fedprof simulate` processes, each with
// `threads` threads and its output in <run>/log.txt. Thread counts never
// change the numbers, so this gives what one process would.
void RunAsProcesses(const std::vector<PlannedRun>& runs, int jobs, int threads) {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) throw Error("compare --jobs: cannot find this executable");
  self[len] = '\0';
  std::map<pid_t, const PlannedRun*> running;
  std::string failed;
  auto wait_one = [&] {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    const PlannedRun* run = running.at(pid);
    running.erase(pid);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::printf("== %s, seed %lld %s\n", run->record.label.c_str(),
                static_cast<long long>(run->record.seed), ok ? "done" : "FAILED");
    std::fflush(stdout);
    if (!ok && failed.empty()) failed = run->record.dir + "/log.txt";
  };
  for (const PlannedRun& run : runs) {
    while (static_cast<int>(running.size()) >= jobs) wait_one();
    const std::string config = run.record.dir + "/config.toml";
    const std::string log = run.record.dir + "/log.txt";
    const std::string threads_set = "threads=" + std::to_string(threads);
    std::vector<std::string> args = {self, "simulate", "--config", config, "--out", run.record.dir,
                                     "--set", threads_set, "--set", "report.progress=false"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, self, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw Error("compare --jobs: cannot start a run process");
    running[pid] = &run;
  }
  while (!running.empty()) wait_one();
  if (!failed.empty()) throw Error("a run failed; see " + failed);
}

}  // namespace

Runner AddCompare(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    std::string strategies = "fedavg,fedprof";
    int seeds = 1;
    int jobs = 1;
    std::string out;
    bool overwrite = false;
    MonitorArgs monitor;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Run several strategies on the same partitions, noise, client specs and seeds");
  sub->add_option("--config", args->config, "Experiment config (TOML)");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--strategies", args->strategies,
                  "Comma-separated name[:full|partial], e.g. fedavg,fedavg:partial,fedprof")
      ->capture_default_str();
  sub->add_option("--seeds", args->seeds, "Seeds per strategy: seed, seed+1, ...")
      ->capture_default_str();
  sub->add_option("--jobs", args->jobs,
                  "Runs at a time, as separate processes sharing the threads; 0 = one per core")
      ->capture_default_str();
  sub->add_option("--out", args->out, "Output directory (default runs/<config>-compare-<time>)");
  sub->add_flag("--overwrite", args->overwrite, "Replace the runs already in --out (refused without it)");
  AddMonitorOptions(sub, &args->monitor);
  return [args] {
    if (ReadDistEnv().distributed()) {
      throw Error("compare: runs in one process (WORLD_SIZE is set); launch each run with "
                  "fedprof launch --nproc N -- simulate ...");
    }
    Config config = Config::Load(args->config, args->sets);
    const std::vector<std::string> strategies = SplitList(args->strategies);
    const std::string out =
        args->out.empty() ? DefaultOutDir(args->config, "compare") : args->out;
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (args->jobs < 0) throw Error("--jobs: expected 0 or more, got " + std::to_string(args->jobs));
    const int jobs = args->jobs == 0 ? cores : args->jobs;
    if (jobs != 1 && !args->monitor.listen.empty()) {
      throw Error("--monitor watches the runs of one process: use it with --jobs 1");
    }
    const std::unique_ptr<RunMonitor> monitor = StartMonitor(args->monitor, "compare");
    const ExistingRun existing = args->overwrite ? ExistingRun::kReplace : ExistingRun::kRefuse;
    std::string table;
    if (jobs == 1) {
      table = RunComparison(config, strategies, args->seeds, out, monitor.get(), existing);
    } else {
      const std::vector<PlannedRun> runs = PlanComparison(config, strategies, args->seeds, out, existing);
      const int threads = config.options().threads > 0 ? static_cast<int>(config.options().threads) : cores;
      RunAsProcesses(runs, jobs, std::max(1, threads / jobs));
      std::vector<RunRecord> records;
      for (const PlannedRun& r : runs) records.push_back(r.record);
      table = WriteComparison(records, config.options().report.target, out);
    }
    std::printf("\n%s\noutputs in %s (comparison.md, comparison.csv, accuracy.png, one folder per "
                "run)\n",
                table.c_str(), out.c_str());
  };
}

}  // namespace fedprof::cli
