#ifndef FEDPROF_SELECTION_SELECTOR_H_
#define FEDPROF_SELECTION_SELECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/core/rng.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

// Clients a selector can draw by rank without a list of them all (the idle
// online clients of an asynchronous run among many: sim/idle_online_index.h).
class RankedClients {
 public:
  virtual ~RankedClients() = default;
  virtual int size() const = 0;
  virtual ClientInfo At(int rank) const = 0;  // rank in [0, size()), by increasing id
};

// What a selector may look at when it picks the round's clients.
struct SelectionContext {
  int64_t round = 0;
  int num_to_select = 0;                             // K
  const std::vector<ClientInfo>* clients = nullptr;  // the available clients, increasing id
  // For a selector that draws by rank (Selector::DrawsByRank), the available
  // clients may come as these instead, `clients` null.
  const RankedClients* ranked = nullptr;
  int size() const { return clients ? static_cast<int>(clients->size()) : ranked->size(); }
};

// Picks the clients that train in a round among the available ones, and
// owns whatever it knows of each client to do so: the reports it asks the
// clients for (profiles, losses, update sketches), what it keeps of them
// between rounds, and the scores behind its choice. Any selector combines
// with any aggregator (strategy/strategy.h); per-client state is indexed by
// client id (ids 0 .. N-1; not every client need ever appear).
//
// Hook order (the server's, through Strategy): OnGlobalModel(initial, 0) (or
// LoadState, then OnGlobalModel(global, round) on resume); then per round:
// Observe for the reports of available clients that HasReport says lack one
// (before round 1: everyone), Select, CheckResult and Observe for each
// result as it arrives (results that fail CheckResult are not observed),
// OnGlobalModel(next, round), LastScores and SaveState. Not thread-safe: the
// server calls one hook at a time.
class Selector {
 public:
  virtual ~Selector() = default;

  // Distinct ids of clients in context.clients, in increasing order.
  virtual std::vector<int> Select(const SelectionContext& context, Rng& rng) = 0;
  // Whether Select looks at no more than context.size() and the ids it
  // draws (IdsAt), so that it can take `ranked` clients.
  virtual bool DrawsByRank() const { return false; }

  // The clients asked to evaluate the global model (eval.federated_every):
  // context.num_to_select distinct ids of context.clients, increasing;
  // by default uniformly at random.
  virtual std::vector<int> SelectEvaluators(const SelectionContext& context, Rng& rng) const;

  // What selected clients report besides their model: a profile of their
  // data, or the received model's loss on it. When anything is asked, the
  // server also collects a report from every client that has none (all of
  // them before round 1) and hands them to Observe.
  struct Reports {
    bool profile = false;
    bool loss = false;
    bool any() const { return profile || loss; }
  };
  virtual Reports WantedReports() const { return {}; }
  // Whether the selector holds a usable report of client `id`.
  virtual bool HasReport(int id) const {
    (void)id;
    return true;
  }

  // Whether the selector reads each result's training loss or its RMS
  // (under secure aggregation a client sends them only then).
  virtual bool NeedsTrainingLoss() const { return false; }

  // > 0: clients return a count sketch of their update of this size.
  virtual int SketchDim() const { return 0; }

  // Completes what client `client_id` is asked to report in a round's or a
  // report's instructions (already holding WantedReports): FedProf adds its
  // encrypted reference under secure matching. A selector may ask clients
  // of the same call different things.
  virtual void ConfigureReport(int client_id, ReportRequest* report) const {
    (void)client_id;
    (void)report;
  }

  // The global model of version `version` (0 = the initial model, then the
  // round that produced it), before each round and after each aggregation.
  virtual void OnGlobalModel(const FlatParams& global, int64_t version) {
    (void)global;
    (void)version;
  }
  // A model version before the current one that a resumed asynchronous
  // run's clients still train on (aggregation/fedbuff.h): shown after
  // OnGlobalModel, so that their results can be read as before the stop.
  virtual void OnEarlierModel(const FlatParams& model, int64_t version) { (void)model, (void)version; }

  // Why a result that passed the server's checks is still unusable (e.g. a
  // malformed profile), or "". A refused result is skipped for the round.
  virtual std::string CheckResult(const FitResult& result) const {
    (void)result;
    return "";
  }

  // Sees one valid result of a round (or a report), in any order.
  virtual void Observe(const FitResult& result) { (void)result; }

  // Per-client scores behind the last selection (one per client id), or
  // empty if the selector does not score clients.
  virtual std::vector<double> LastScores() const { return {}; }

  // Whether the selector keeps state between rounds. If so, SaveState gives
  // it as a JSON object (the strategy adds its aggregator's state under the
  // key "aggregator", which LoadState ignores), and LoadState(SaveState())
  // restores it, throwing fedprof::Error when the state does not fit this
  // selector (another population size, malformed text).
  virtual bool KeepsState() const { return false; }
  virtual std::string SaveState() const { return ""; }
  virtual void LoadState(const std::string& state) { (void)state; }
};

// K distinct clients uniformly at random (FedAvg, FedAvg-RP).
std::unique_ptr<Selector> MakeUniformSelector();

// Poisson sampling: each available client independently with probability
// `rate`, whatever K is (user-level DP: the accountant's subsampling;
// a round may have any number of clients, none included).
std::unique_ptr<Selector> MakePoissonSelector(double rate);

// K distinct clients with probability proportional to their data size
// (FedProx's device sampling).
std::unique_ptr<Selector> MakeSizeWeightedSelector();

// First come, first merged (CFCFM, Wu et al., SAFA, IEEE TC 2021): every
// client is invited and the first K to finish are merged; with known round
// times (ClientInfo::expected_time_s: the cost model's in simulation, the
// last measured one in a deployment) those are the K fastest clients, ties
// by id. A client whose time is unknown counts as fastest, so it gets
// measured.
std::unique_ptr<Selector> MakeFirstComeSelector();

// Active Federated Learning's selection (Goetz et al. 2019, Alg. 1) from the
// clients' valuations: the lowest `drop_share` (α1) of valuations are
// excluded, (1 − random_share) K clients are drawn without replacement with
// probability ∝ exp(temperature · v_k) (α2) from the rest, and random_share
// (α3) K more uniformly from all not yet chosen.
struct AflOptions {
  double drop_share = 0.75;   // α1
  double temperature = 0.01;  // α2
  double random_share = 0.1;  // α3
};
std::vector<int> SelectAfl(const std::vector<double>& values, int k, const AflOptions& options,
                           Rng& rng);

// Indices into `weights` drawn with probability proportional to the
// weights (>= 0), in increasing order. Without replacement: k successive weighted draws, each
// removing the drawn client, so k distinct clients (fewer only when fewer
// have positive weight). With replacement: k independent draws, as Python's
// random.choices does; a client drawn twice appears once. If every weight is
// 0 the draw is uniform.
std::vector<int> SampleByWeight(const std::vector<double>& weights, int k, bool with_replacement,
                                Rng& rng);

// Poisson sampling by weight (user-level DP): the inclusion probabilities
// p_k = min(cap, c · w_k) with c such that Σ p_k = expected (every client of
// positive weight at `cap` when they cannot reach it), by water-filling;
// clients of weight 0 get 0.
std::vector<double> CappedInclusion(const std::vector<double>& weights, double expected, double cap);
// Indices i drawn independently with probability inclusion[i], in
// increasing order: one Uniform01 draw per index, in index order.
std::vector<int> PoissonSample(const std::vector<double>& inclusion, Rng& rng);

// The first k of a partial Fisher-Yates shuffle of 0 .. n-1 (a uniform
// k-subset, in draw order), in O(k): positions moved are kept aside.
std::vector<int> UniformIndices(int n, int k, Rng& rng);

// The ids of the context's clients at `indices`.
std::vector<int> IdsAt(const SelectionContext& context, const std::vector<int>& indices);

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_SELECTOR_H_
