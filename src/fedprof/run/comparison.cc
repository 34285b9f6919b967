#include "fedprof/run/comparison.h"

#include <algorithm>
#include <cstdio>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/run/simulation.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

std::vector<PlannedRun> PlanComparison(const Config& base, const std::vector<std::string>& strategies,
                                       int seeds, const std::string& out_dir, ExistingRun existing) {
  if (strategies.empty()) throw Error("--strategies: name at least one strategy");
  if (seeds < 1) throw Error("--seeds: expected at least 1, got " + std::to_string(seeds));
  // Validate every strategy before the first (long) run starts.
  std::vector<Config> configs;
  std::vector<std::string> labels;
  for (const std::string& spec : strategies) {
    Config c = base;
    const auto colon = spec.find(':');
    const std::string name = spec.substr(0, colon);
    const auto plus = name.find('+');
    if (plus == std::string::npos) {  // a preset, as it comes
      c.Set("strategy.name", name, "--strategies");
      c.Set("strategy.selector", "", "--strategies");
      c.Set("strategy.aggregator", "", "--strategies");
    } else {  // selector+aggregator
      c.Set("strategy.name", "fedavg", "--strategies");
      c.Set("strategy.selector", name.substr(0, plus), "--strategies " + spec);
      c.Set("strategy.aggregator", name.substr(plus + 1), "--strategies " + spec);
    }
    if (colon != std::string::npos) c.Set("strategy.aggregation", spec.substr(colon + 1), "--strategies");
    const std::string label =
        ResolveStrategy(c.options()).Label() + "-" + c.options().strategy.aggregation;
    if (std::find(labels.begin(), labels.end(), label) != labels.end()) {
      throw Error("--strategies: " + spec + " is " + label + " again; name each strategy once");
    }
    labels.push_back(label);
    configs.push_back(std::move(c));
  }
  std::vector<PlannedRun> runs;
  const int64_t first_seed = base.options().seed;
  for (int i = 0; i < seeds; ++i) {
    for (size_t j = 0; j < configs.size(); ++j) {
      PlannedRun run{{labels[j], first_seed + i,
                      out_dir + "/" + labels[j] + "/seed-" + std::to_string(first_seed + i)},
                     configs[j]};
      run.config.Set("seed", std::to_string(first_seed + i), "--seeds");
      runs.push_back(std::move(run));
    }
  }
  // Every folder checked before any is written: a refused comparison
  // changes nothing.
  if (existing == ExistingRun::kRefuse) {
    for (const PlannedRun& run : runs) ClaimRunDir(run.record.dir, ExistingRun::kRefuse);
  }
  for (const PlannedRun& run : runs) {
    ClaimRunDir(run.record.dir, existing);
    MakeDirs(run.record.dir);
    WriteFileAtomic(run.record.dir + "/config.toml", run.config.ToToml());
  }
  return runs;
}

std::string RunComparison(const Config& base, const std::vector<std::string>& strategies,
                          int seeds, const std::string& out_dir, RunObserver* observer,
                          ExistingRun existing) {
  std::vector<RunRecord> records;
  for (const PlannedRun& run : PlanComparison(base, strategies, seeds, out_dir, existing)) {
    std::printf("== %s, seed %lld -> %s\n", run.record.label.c_str(),
                static_cast<long long>(run.record.seed), run.record.dir.c_str());
    std::fflush(stdout);
    RunSimulation(run.config, run.record.dir, observer);
    records.push_back(run.record);
  }
  return WriteComparison(records, base.options().report.target, out_dir);
}

}  // namespace fedprof
