#ifndef FEDPROF_RUN_COMPARISON_H_
#define FEDPROF_RUN_COMPARISON_H_

// `fedprof compare`: several strategies over several seeds on otherwise
// identical runs, and the comparison of their outputs (report/comparison.h).

#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/report/comparison.h"
#include "fedprof/run/run_dir.h"

namespace fedprof {

class RunObserver;

// The runs of a comparison, validated, with each one's config and folder
// (its config.toml is written there), for a caller that runs them itself,
// e.g. as concurrent processes; then WriteComparison (report/comparison.h)
// with base's report.target. Each strategy is "preset[:full|partial]" (e.g.
// "fedavg:partial"; the preset as it comes: strategy.selector and
// strategy.aggregator are cleared) or "selector+aggregator[:full|partial]"
// (e.g. "fedprof+fedadam"); every other option, train.proximal_mu included,
// is `base`'s. The label is the preset's name, or the composition's
// (StrategySpec::Label); two entries with the same label are refused. Runs
// go into out_dir/<label>-<aggregation>/seed-<s>/ for seeds seed, seed+1,
// ..., seed+seeds-1, each claimed as a new run's folder (ClaimRunDir:
// `existing` says what becomes of an earlier run there).
struct PlannedRun {
  RunRecord record;
  Config config;
};
std::vector<PlannedRun> PlanComparison(const Config& base, const std::vector<std::string>& strategies,
                                       int seeds, const std::string& out_dir, ExistingRun existing);

// Runs the planned runs one after the other in this process, each watched
// by `observer` (null: none), then writes the comparison. Returns its
// Markdown table.
std::string RunComparison(const Config& base, const std::vector<std::string>& strategies,
                          int seeds, const std::string& out_dir, RunObserver* observer = nullptr,
                          ExistingRun existing = ExistingRun::kRefuse);

}  // namespace fedprof

#endif  // FEDPROF_RUN_COMPARISON_H_
