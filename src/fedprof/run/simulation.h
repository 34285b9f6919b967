#ifndef FEDPROF_RUN_SIMULATION_H_
#define FEDPROF_RUN_SIMULATION_H_

#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/data/dataset.h"
#include "fedprof/run/run_dir.h"

namespace fedprof {

class Model;
class RunObserver;

// Runs one simulated federated training from `config`, writing into
// `out_dir`: config.toml (the resolved config), metrics.csv (a row per
// round), clients.csv, summary.json and checkpoint.bin (updated every round).
// Every file is replaced atomically. `observer` (null: none) watches it.
// A run already in `out_dir` is refused, or replaced (`existing`).
//
// In a distributed run (the torchrun environment, WORLD_SIZE > 1; see
// distributed/rank_group.h) rank 0 does this with the clients spread over
// the ranks (distributed/distributed_transport.h) and the same results; a
// rank > 0 runs RunSimulationWorker instead and writes nothing.
void RunSimulation(const Config& config, const std::string& out_dir, RunObserver* observer = nullptr,
                   ExistingRun existing = ExistingRun::kRefuse);

// The part of a rank > 0 in a distributed simulation: joins the group
// (waiting at most `rendezvous_timeout_s`), takes the run's config from
// rank 0, trains its share of the clients until the run ends. Throws
// fedprof::Error ("rank R: ...") when the run fails on any rank.
void RunSimulationWorker(double rendezvous_timeout_s);

// The global model of the run in `run` (a run directory or its
// checkpoint.bin), shaped for samples like those of `data`; *version gets the
// model version (the rounds the run completed).
std::shared_ptr<Model> LoadRunModel(const std::string& run, const Dataset& data,
                                    int64_t* version);

// Continues the run in `out_dir` (its config.toml and checkpoint.bin) from
// the last completed round. `overrides` are --set assignments of the options
// a resume may change (OptionSpec::resumable); any other key is an error.
// Distributed as RunSimulation; a rank > 0 reads nothing from
// `out_dir`.
void ResumeSimulation(const std::string& out_dir, const std::vector<std::string>& overrides,
                      RunObserver* observer = nullptr);

}  // namespace fedprof

#endif  // FEDPROF_RUN_SIMULATION_H_
