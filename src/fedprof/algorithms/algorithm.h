#ifndef FEDPROF_ALGORITHMS_ALGORITHM_H_
#define FEDPROF_ALGORITHMS_ALGORITHM_H_

// Client algorithms (docs/algorithms.md): what runs on a client around its
// local training (loss terms, corrected steps, what it sends beside the
// model and what it keeps between rounds) and its server half (what the
// server keeps and sends, and how it changes the round's step). Each
// algorithm has one file holding both halves: fedprox.cc, scaffold.cc,
// fednova.cc, feddyn.cc and moon.cc. This header is torch-free: the server half and
// the names; the client half is local_algorithm.h.

#include <memory>
#include <string>

#include "fedprof/config/run_options.h"
#include "fedprof/core/params.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

// The server half of a client algorithm. The round loop calls, per round:
// Broadcast (sent with every training task), Check and Observe for each
// result the strategy accepted (in any order: nothing may depend on it),
// then Finish on the aggregator's model; SaveState after it.
class ServerAlgorithm {
 public:
  virtual ~ServerAlgorithm() = default;

  // What goes to every client of the next round beside θ
  // (FitInstructions::algorithm_values), or null.
  virtual std::shared_ptr<const FlatParams> Broadcast() const { return nullptr; }
  // "" when what an accepted result carries for the algorithm is usable
  // (sizes, finite values in range), else why the result is refused.
  virtual std::string Check(const FitResult& result, size_t num_params) const = 0;
  // An accepted result of this round, whose model is already in the sum.
  virtual void Observe(const FitResult& result, const FlatParams& global) = 0;
  // The round's step: `next` holds the aggregator's model from `global` and
  // may be replaced; `num_clients` is N, the population.
  virtual void Finish(const FlatParams& global, int num_clients, FlatParams* next) = 0;

  // Opaque state for checkpoints; LoadState throws fedprof::Error when it
  // does not fit.
  virtual std::string SaveState() const { return ""; }
  virtual void LoadState(const std::string& state) { (void)state; }
};

// The client algorithms strategy.algorithm names: the one list the
// factories (algorithm.cc), the options and the strategy consult.
// kRegistered: one registered from outside the engine (algorithms/registry.h).
enum class AlgorithmKind { kNone, kScaffold, kFedNova, kFedDyn, kMoon, kRegistered };

// What the server half reads of a round's results, which decides what it
// composes with (strategy.cc): nothing (the aggregator is its server
// half), their sum (secure aggregation gives it), or each one (no secure
// aggregation, no relays' partial sums).
enum class ServerReads { kNothing, kSum, kEach };

struct AlgorithmName {
  const char* name;
  AlgorithmKind kind;
  bool keeps_state;       // its clients keep state between rounds
  bool sends_vector;      // a result carries a vector of the model's size beside it
  ServerReads reads;
  bool assumes_average;   // its server step is over the average of the models
  const char* each_read;  // what it reads of each result, when kEach
  const char* reset;      // what a client without its state (lost, corrupt) starts from
};

inline constexpr AlgorithmName kAlgorithmNames[] = {
    {"none", AlgorithmKind::kNone, false, false, ServerReads::kNothing, false, "", ""},
    {"scaffold", AlgorithmKind::kScaffold, true, true, ServerReads::kEach, true,  // Δc_i
     "control-variate update Δc_i", "SCAFFOLD starts again from c_i = 0"},
    {"fednova", AlgorithmKind::kFedNova, false, false, ServerReads::kEach, true, "model and its steps", ""},
    {"feddyn", AlgorithmKind::kFedDyn, true, false, ServerReads::kSum, true, "",
     "FedDyn starts again from a kept gradient of 0"},
    {"moon", AlgorithmKind::kMoon, true, false, ServerReads::kNothing, false, "",
     "MOON trains this round without a previous model"},
};

// A registered algorithm's entry (its name is its own): its server half is
// given each result's values, its clients may keep state.
inline constexpr AlgorithmName kRegisteredAlgorithm = {
    "", AlgorithmKind::kRegistered, true, false, ServerReads::kEach, false, "values from its client half",
    "the algorithm starts again from nothing kept"};

// Whether `name` is registered (algorithms/registry.h).
bool IsRegisteredAlgorithm(const std::string& name);

// The entry named `algorithm` ("" reads as none), or null.
inline const AlgorithmName* FindAlgorithm(const std::string& algorithm) {
  for (const AlgorithmName& a : kAlgorithmNames) {
    if (algorithm == a.name || (algorithm.empty() && a.kind == AlgorithmKind::kNone)) return &a;
  }
  return IsRegisteredAlgorithm(algorithm) ? &kRegisteredAlgorithm : nullptr;
}

// Whether clients of `objective`'s algorithm keep state between rounds:
// such a client must be trained where its state lives (its rank, its own
// process).
inline bool KeepsAlgorithmState(const LocalObjective& objective) {
  const AlgorithmName* a = FindAlgorithm(objective.algorithm);
  return a != nullptr && a->keeps_state;
}

// Whether a result of `objective`'s algorithm carries a vector of the
// model's size beside the model (SCAFFOLD's Δc_i).
inline bool SendsAlgorithmVector(const LocalObjective& objective) {
  const AlgorithmName* a = FindAlgorithm(objective.algorithm);
  return a != nullptr && a->sends_vector;
}

// The client algorithm's options in the local objective (`algorithm`:
// strategy.algorithm or the preset's; scaffold.*, feddyn.*, moon.*), as the
// strategy sends them.
inline void SetAlgorithmOptions(const RunOptions& options, const std::string& algorithm,
                                LocalObjective* objective) {
  objective->algorithm = algorithm;
  objective->scaffold_correct = options.scaffold.correct;
  objective->feddyn_alpha = options.feddyn.alpha;
  objective->moon_mu = options.moon.mu;
  objective->moon_tau = options.moon.tau;
}

// The server half of `algorithm` ("" or a name of strategy.algorithm's
// choices), or null when it has none (plain SGD).
std::unique_ptr<ServerAlgorithm> MakeServerAlgorithm(const std::string& algorithm, const RunOptions& options);

}  // namespace fedprof

#endif  // FEDPROF_ALGORITHMS_ALGORITHM_H_
