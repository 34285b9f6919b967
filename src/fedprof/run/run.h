#ifndef FEDPROF_RUN_RUN_H_
#define FEDPROF_RUN_RUN_H_

// The server side of a run from a config, shared by every way of running
// it: `simulate` (clients in this process), `server` (clients on other
// machines over gRPC) and distributed simulation (clients on other ranks).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/models/models.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/population.h"

namespace fedprof {

class Transport;

// One row of clients.csv.
struct ClientRow {
  int64_t size = 0;
  std::string kind = "unknown";  // data kind: known in simulation only
  double speed_ghz = 0;          // 0: unknown
  double bandwidth_mhz = 0;
  double round_s = 0;  // a round's time: the cost model's (simulation) or the mean measured
};

// What the outputs need from wherever the clients live.
struct ClientSide {
  // clients.csv's rows (client k at index k), asked once the rounds are done.
  std::function<std::vector<ClientRow>()> rows;
  // State the clients keep between rounds, saved with every checkpoint
  // (simulated FedBN clients), or null.
  std::function<std::string()> save_states;
  // Called once the run's config has passed every check, just before round
  // 1 (or the first resumed round), or null.
  std::function<void()> on_ready;
};

// The model `config` describes for samples like those of `data`.
ModelSpec SpecFor(const Config& config, const Dataset& data);

// The run's initial global model (seeded by `seed`).
std::shared_ptr<Model> InitialModel(const Config& config, const ModelSpec& spec);

class Strategy;

// Refuses (fedprof::Error, one line) a strategy that `model` cannot serve:
// FedBN with a model without batch norm, selection by profiles with a model
// that cannot be profiled.
void CheckStrategyFitsModel(const Strategy& strategy, const Model& model, const Config& config);

// q: the units of `model`'s profiled layer, from one sample of `data`.
int64_t ProfiledUnits(Model& model, const Dataset& data);

// FedProf's reference set D_V (fedprof.reference): the held-out share, the
// test set, or (`population` given) one client's data. Throws
// fedprof::Error when it is empty or unavailable where the run needs it.
Dataset ReferenceSet(const Config& config, const TrainTest& data, const Population* population);

// The ServerOptions of `config` (no quorum: simulated clients never fail to
// answer; a deployment adds deploy.min_results and deploy.round_attempts).
ServerOptions ServerOptionsFrom(const Config& config);

// Runs rounds state.round + 1 .. rounds over `transport`, writing into
// `out_dir` metrics.csv, scores.csv (FedProf, AFL) and checkpoint.bin after
// every round, then clients.csv, summary.json and the plots. `resume` keeps
// the scores rows up to the checkpoint. Every file is replaced atomically.
void RunRounds(const Config& config, const ServerOptions& options, const TrainTest& data,
               const Dataset& reference, const std::string& out_dir, ServerState state,
               bool resume, Transport& transport, const ClientSide& clients);

// The config of the run in `out_dir` with the --set `overrides` a resume
// allows (MayChangeOnResume: rounds, threads, report.progress,
// dist.timeout_s, deploy.*); any other key is an error. The caller checks
// it against the checkpoint's fingerprint before writing it back.
Config ResumeConfig(const std::string& out_dir, const std::vector<std::string>& overrides);

}  // namespace fedprof

#endif  // FEDPROF_RUN_RUN_H_
