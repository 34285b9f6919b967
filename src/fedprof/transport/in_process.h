#ifndef FEDPROF_TRANSPORT_IN_PROCESS_H_
#define FEDPROF_TRANSPORT_IN_PROCESS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/client/client.h"
#include "fedprof/core/state_store.h"
#include "fedprof/core/thread_pool.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

class Model;

// Clients living in this process (simulation, tests), trained concurrently
// on a thread pool, one model instance per worker thread. Results do not
// depend on the number of threads: each client's work depends only on its
// instructions, and each result is handed over as soon as it is made.
class InProcessTransport : public Transport {
 public:
  using ModelFactory = std::function<std::shared_ptr<Model>()>;
  using ClientFactory = std::function<Client(int id)>;
  // The virtual cost of a client's result (the cost model), or null: of
  // its task and of what the result carries (a client algorithm's values).
  using CostFn = std::function<ResultCost(int id, const FitInstructions& instructions, const FitResult& result)>;

  // `infos` describes every client, client k at index k. `make_client`
  // builds client k with its data: once, on first use, when `keep_clients`;
  // otherwise for every task, dropped after it (memory then grows with the
  // clients trained at once, not with the population).
  InProcessTransport(std::vector<ClientInfo> infos, ClientFactory make_client, bool keep_clients,
                     ModelFactory make_model, int num_threads, CostFn cost = nullptr);

  int num_clients() const override { return static_cast<int>(infos_.size()); }
  std::vector<ClientInfo> Available() override { return infos_; }
  const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) override {
    *availability = nullptr;
    return &infos_;
  }
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;

  // What clients keep between rounds (FedBN's batch-norm values, the client
  // algorithm's state) as one
  // string for checkpoints, and back; LoadState throws fedprof::Error when
  // the string does not fit these clients.
  std::string SaveState() override;
  void LoadState(const std::string& states) override;

  // Clients whose profile-only tasks (FedProf's report pass) share forward
  // passes: the clients of one group of `clients` consecutive ids
  // (ProfileGroupOf) with fewer samples than one pass holds are profiled
  // together; larger clients, whose passes are full anyway, alone. 1: every
  // client alone, as a deployed client computes its profile. The grouping
  // depends only on the ids, so results do not depend on the threads.
  void set_profile_group(int clients) { profile_group_ = clients; }
  int profile_group() const { return profile_group_; }

  // Clients whose inputs are rows of `tables`, which many clients hold alike
  // (`rows_of` says which rows client `id` holds, or returns false when its
  // inputs are its own). With profile groups (above), such a client of
  // fewer samples than one pass takes its profile-only task's rows from one
  // computation per table row under θ (SharedRepresentations) instead of
  // passes of its own, and its data is never built.
  using RowsOf = std::function<bool(int id, TableRows* rows)>;
  void set_shared_inputs(InputTables tables, RowsOf rows_of) {
    tables_ = std::move(tables);
    rows_of_ = std::move(rows_of);
  }

  // What clients keep (FedBN's batch norm, the client algorithm's state)
  // within `budget_bytes` of memory for each kind (0: no budget), spilled
  // beyond it under `spill_dir` (core/state_store.h). With `inline_states`,
  // SaveState carries every state itself, not the names of spilled files
  // (a rank's states, which travel to rank 0).
  void set_state_store(size_t budget_bytes, const std::string& spill_dir);
  void set_inline_states(bool inline_states) { inline_states_ = inline_states; }
  const ClientStateStore& algorithm_states() const { return *algorithm_states_; }

  // clients.csv's rows, when the owner knows more of its clients (data
  // kinds, devices) than their ClientInfo says.
  void set_describe(std::function<std::vector<ClientDescription>()> describe) {
    describe_ = std::move(describe);
  }
  std::vector<ClientDescription> Describe() override {
    return describe_ ? describe_() : Transport::Describe();
  }

 private:
  std::vector<ClientInfo> infos_;
  ClientFactory make_client_;
  bool keep_clients_;
  CostFn cost_;
  ThreadPool pool_;
  std::vector<std::shared_ptr<Model>> worker_models_;
  // The global model a worker's model holds unchanged since, or null.
  std::vector<std::shared_ptr<const FlatParams>> worker_loaded_;
  std::vector<std::optional<Client>> kept_;  // by id, when keep_clients_
  // By id, only clients that keep state: FedBN's, the client algorithm's.
  std::unique_ptr<ClientStateStore> batch_norm_states_ = std::make_unique<ClientStateStore>();
  std::unique_ptr<ClientStateStore> algorithm_states_ = std::make_unique<ClientStateStore>();
  bool inline_states_ = false;
  std::function<std::vector<ClientDescription>()> describe_;
  int profile_group_ = 1;
  InputTables tables_;
  RowsOf rows_of_;

  // Client `id` for one task: kept, or made into `made`.
  Client& ClientFor(int id, std::optional<Client>* made);
  // Profile-only tasks, a group of clients per work item.
  void ProfileInGroups(const std::vector<ClientInstructions>& tasks, const ResultSink& sink);
};

// The group of client `id` when groups hold `group` consecutive ids.
inline int64_t ProfileGroupOf(int id, int group) { return group > 1 ? id / group : id; }

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_IN_PROCESS_H_
