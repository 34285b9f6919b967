#ifndef FEDPROF_RUN_PLAN_H_
#define FEDPROF_RUN_PLAN_H_

// A run assembled once from its config: the data, the model spec (a
// TorchScript file hashed once), the initial model, the strategy with its
// checks, the reference set and the round loop's options. Every way of
// running (simulate, each rank of a launch, server, and the resume of each)
// builds one plan and runs from it, so a check passes or fails alike
// everywhere, before any client is waited for.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/run/run_dir.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// Where the run's clients hold their data.
enum class ClientsLive {
  kHere,       // simulated in this process (simulate, every rank of a launch)
  kElsewhere,  // on other machines (server): no population here
};

// Not copyable or movable: the strategy refers to its server_models and
// reference set.
struct RunPlan {
  RunPlan() = default;
  RunPlan(const RunPlan&) = delete;
  RunPlan& operator=(const RunPlan&) = delete;

  Config config;  // as resolved: config.toml
  const RunOptions& options() const { return config.options(); }

  TrainTest data;
  std::unique_ptr<Population> population;  // kHere only
  ModelSpec spec;
  std::shared_ptr<Model> initial_model;    // seeded by the run's seed
  int64_t num_params = 0;  // its trainable parameters (summary.json)
  int64_t num_values = 0;  // the values a model travels as: parameters and buffers (Flatten)
  // Server-side inference (evaluation, reference profiles) on all threads.
  std::unique_ptr<ModelReplicas> server_models;
  // Checked against the model; its reference profiles come from
  // server_models and `reference`.
  std::unique_ptr<Strategy> strategy;
  Dataset reference;      // D_V; empty unless the strategy profiles clients or runs FLTrust
  Dataset triggered_test;  // the backdoor's success is measured on it; empty without one
  ServerOptions rounds;   // the round loop's options

  int num_clients() const { return static_cast<int>(options().clients.count); }
};

// Builds the plan of `config`. Throws fedprof::Error (one line, naming the
// option) for data that cannot be loaded, a model or strategy that does not
// fit, or a reference set that is empty or unavailable. `observer` (null:
// none) hears of the strategy's secure-matching time.
std::unique_ptr<RunPlan> MakePlan(const Config& config, ClientsLive where,
                                  RunObserver* observer = nullptr);
// The same on data already loaded (the data.* options are not read).
std::unique_ptr<RunPlan> MakePlan(const Config& config, ClientsLive where, TrainTest data,
                                  RunObserver* observer = nullptr);

// The pieces of a plan, for the commands that need only one of them.

// The model the model.* options describe for samples like those of `data`;
// hashes model.file.
ModelSpec SpecFor(const RunOptions::Model& options, const Dataset& data);

// The run's initial global model, seeded by `seed`.
std::shared_ptr<Model> InitialModel(int64_t seed, const ModelSpec& spec);

// Refuses (fedprof::Error, one line) a strategy that `model` cannot serve:
// FedBN with a model without batch norm, selection by profiles with a model
// that cannot be profiled.
void CheckStrategyFitsModel(const Strategy& strategy, const Model& model,
                            const RunOptions::Model& options);

// q: the units of `model`'s profiled layer, from one sample of `data`.
int64_t ProfiledUnits(Model& model, const Dataset& data);

// FedProf's reference set D_V (fedprof.reference): the held-out share, the
// test set, or (`population` given) one client's data. Throws
// fedprof::Error when it is unavailable where the run needs it.
Dataset ReferenceSet(const RunOptions::FedProf& options, const TrainTest& data,
                     const Population* population);

// The round loop's options, merged from the sections it reads (ServerOptions
// says which): a deployment's quorum is deploy.min_results and
// deploy.round_attempts; simulated clients never fail to answer.
ServerOptions ServerOptionsFrom(const RunOptions& options, ClientsLive where);

// The config of the run in `out_dir` with the --set `overrides` a resume
// allows (OptionSpec::resumable); any other key is an error. The caller
// checks it against the checkpoint's fingerprint before writing it back.
Config ResumeConfig(const std::string& out_dir, const std::vector<std::string>& overrides);

// Where a run starts: round 0 of a new run, or the checkpoint of the run in
// `out_dir`. Start claims the folder (ClaimRunDir) and writes the config to
// out_dir/config.toml; Resume reads it (with `overrides`), checks it against
// the checkpoint and writes it back.
struct RunStart {
  Config config;
  ServerState state;
  bool resume = false;
};
RunStart StartRun(const Config& config, const std::string& out_dir, ExistingRun existing);
RunStart ResumeRun(const std::string& out_dir, const std::vector<std::string>& overrides);

}  // namespace fedprof

#endif  // FEDPROF_RUN_PLAN_H_
