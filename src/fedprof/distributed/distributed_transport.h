#ifndef FEDPROF_DISTRIBUTED_DISTRIBUTED_TRANSPORT_H_
#define FEDPROF_DISTRIBUTED_DISTRIBUTED_TRANSPORT_H_

// Distributed simulation: the clients of one simulated population spread
// over the ranks of a RankGroup. Rank 0 runs the server over a
// DistributedTransport; every other rank runs RunWorker.
//
// Each Fit call's clients are split over the ranks by AssignRanks: by work,
// so that the ranks finish together, except that a client keeping state
// between rounds (FedBN's batch norm) always lives on rank k mod W. Every
// rank builds the same population from the run's config and trains its
// share of each Fit call through its own InProcessTransport (`threads` per
// rank), computing each result's virtual cost itself. Results do not depend on which rank trained
// what, and the server's aggregation is an exact sum, so the metrics are
// those of a single process for any number of ranks and threads.
//
// Rank 0 drives the others with commands, each a point-to-point RankMessage:
//   CONFIG       the resolved config as TOML and whether the run resumes;
//                the worker builds its clients and answers READY or FAILED.
//   FIT          a TaskHeader (proto/federation.proto), the global model and
//                the ids of the rank's clients told just that; the worker
//                sends one RESULT per client (a ResultHeader and the model)
//                as each is made, and results without a model (reports) as
//                RESULTS, a ResultBatch of up to 64. A call whose clients are told different
//                things sends each rank one FIT per distinct instructions,
//                one after the other's results.
//   SAVE_STATES  the worker answers STATES: its clients' kept state (JSON).
//   LOAD_STATES  its clients' share of a checkpoint's states; answer ACK.
//   STOP         the run is complete: the worker returns.
//   ABORT        rank 0 failed: the worker ends with an error.
// Any failure ends the run on every rank with one line naming the rank and
// what happened; no wait is longer than the group's timeout (dist.timeout_s).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/transport/transport.h"

namespace fedprof {

class Config;
class InProcessTransport;
class RankGroup;

// Which rank trains each of `client_ids` in one Fit call. When clients
// keep state between rounds (`keeps_state`: FedBN), client k always lives on
// rank k mod `world`. Otherwise the work is balanced: largest client first
// (`sizes` by id; ties by id), each to the rank with the fewest samples so
// far (ties: the lowest rank), so that the ranks finish a round together.
// With `group` > 1 the units dealt out are the groups of `group`
// consecutive ids (ProfileGroupOf: clients profiled together), so that a
// group's clients share a rank and share forward passes there as they
// would in one process. Deterministic; results never depend on it.
std::vector<int> AssignRanks(const std::vector<int>& client_ids, bool keeps_state, int world,
                             const std::vector<int64_t>& sizes, int group = 1);

// Rank 0's transport. Thread-compatible, like the server that uses it.
class DistributedTransport : public Transport {
 public:
  // `group` is this process's group (rank 0); `local` holds every client of
  // the population and trains rank 0's share. Both must outlive this.
  // `progress`: Close logs what the ranks sent per round.
  DistributedTransport(RankGroup& group, InProcessTransport& local, bool progress = false);
  // A transport destroyed before Close (rank 0 failed) tells the workers to
  // abort, waiting a few seconds at most.
  ~DistributedTransport() override;

  // Waits until every worker has built its clients (after SendConfig).
  // Throws fedprof::Error naming a rank that failed or whose clients differ
  // from rank 0's.
  void Open() override;
  // Releases the workers once the run is complete.
  void Close() override;

  int num_clients() const override;
  std::vector<ClientInfo> Available() override;
  const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) override;
  // Trains rank 0's share locally while the others' results arrive; hands
  // each result to `sink` as it comes. Throws fedprof::Error naming the
  // round and the rank when a rank is lost, silent past the timeout or
  // failed.
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;

  // Every client's kept state, gathered from the ranks, in the format of
  // InProcessTransport::SaveState (and equal to what one process would
  // write), and back (given before Open, sent once the workers are ready).
  std::string SaveState() override;
  void LoadState(const std::string& states) override;

  // Rank 0's clients describe the whole population: every rank builds it.
  std::vector<ClientDescription> Describe() override;

  // Bytes each rank has sent so far (rank r at index r): workers send only
  // to rank 0, so rank 0 counts them all.
  std::vector<int64_t> BytesSentByRank() const;

 private:
  // Runs fn(rank) for every worker rank at once, one thread each, and
  // `meanwhile` (if any) on this thread, then rethrows the first failure
  // with `context` and this rank named.
  void ForEachWorker(const std::string& context, const std::function<void(int)>& fn,
                     const std::function<void()>& meanwhile = nullptr);

  RankGroup& group_;
  InProcessTransport& local_;
  std::vector<int64_t> sizes_;  // |D_k|, by client id
  int64_t task_id_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  bool may_keep_states_ = false;  // a client may hold state (FedBN) on some rank
  bool progress_ = false;
  std::string pending_state_;       // LoadState before Open
  int64_t training_rounds_ = 0;     // rounds trained, for Close's traffic line
  int64_t last_training_round_ = -1;
};

// Rank 0's first command: sends every worker the run's config (TOML) and
// whether it resumes, so that the workers build their clients while rank 0
// builds its own; then DistributedTransport::Start. Throws fedprof::Error
// naming a rank that is lost.
void SendConfig(RankGroup& group, const std::string& config_toml, bool resume);

// Builds this rank's clients (the whole population; only its share will be
// trained) from the run's config.
using LocalClientsFactory =
    std::function<std::shared_ptr<InProcessTransport>(const Config& config)>;

// The life of a rank > 0: receives the config from rank 0, builds its
// clients with `make_clients`, serves commands until STOP and returns.
// Throws fedprof::Error ("rank R: ...") when rank 0 is lost, silent past the
// timeout or aborts the run, or when building the clients fails (after
// telling rank 0).
void RunWorker(RankGroup& group, const LocalClientsFactory& make_clients);

}  // namespace fedprof

#endif  // FEDPROF_DISTRIBUTED_DISTRIBUTED_TRANSPORT_H_
