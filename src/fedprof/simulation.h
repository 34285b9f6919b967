#ifndef FEDPROF_SIMULATION_H_
#define FEDPROF_SIMULATION_H_

#include <string>
#include <vector>

#include "fedprof/config/config.h"

namespace fedprof {

// Runs one simulated federated training from `config`, writing into
// `out_dir`: config.toml (the resolved config), metrics.csv (a row per
// round), clients.csv, summary.json and checkpoint.bin (updated every round).
// Every file is replaced atomically.
void RunSimulation(const Config& config, const std::string& out_dir);

// Continues the run in `out_dir` (its config.toml and checkpoint.bin) from
// the last completed round. `overrides` are --set assignments; only rounds,
// threads and report.progress may change, any other key is an error.
void ResumeSimulation(const std::string& out_dir, const std::vector<std::string>& overrides);

}  // namespace fedprof

#endif  // FEDPROF_SIMULATION_H_
