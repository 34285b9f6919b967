// fedprof compare: several strategies on the same clients and seeds.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/text.h"
#include "fedprof/simulation.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {

Runner AddCompare(CLI::App& app) {
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    std::string strategies = "fedavg,fedprof";
    int seeds = 1;
    std::string out;
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
  sub->add_option("--out", args->out, "Output directory (default runs/<config>-compare-<time>)");
  return [args] {
    Config config;
    if (!args->config.empty()) config.MergeTomlFile(args->config);
    for (const auto& s : args->sets) config.SetAssignment(s);
    const std::vector<std::string> strategies = SplitList(args->strategies);
    const std::string out =
        args->out.empty() ? DefaultOutDir(args->config, "compare") : args->out;
    const std::string table = RunComparison(config, strategies, args->seeds, out);
    std::printf("\n%s\noutputs in %s (comparison.md, comparison.csv, accuracy.png, one folder per "
                "run)\n",
                table.c_str(), out.c_str());
  };
}

}  // namespace fedprof::cli
