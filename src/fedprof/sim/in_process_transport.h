#ifndef FEDPROF_SIM_IN_PROCESS_TRANSPORT_H_
#define FEDPROF_SIM_IN_PROCESS_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/thread_pool.h"
#include "fedprof/sim/transport.h"

namespace fedprof {

class Model;

// Clients living in this process, trained concurrently on a thread pool, one
// model instance per worker thread. Results do not depend on the number of
// threads: each client's work depends only on its instructions.
class InProcessTransport : public Transport {
 public:
  using ModelFactory = std::function<std::shared_ptr<Model>()>;

  InProcessTransport(std::vector<Client> clients, ModelFactory make_model, int num_threads);

  int num_clients() const override { return static_cast<int>(clients_.size()); }
  ClientInfo Info(int client_id) const override;
  std::vector<FitResult> Fit(const std::vector<int>& client_ids,
                             const FitInstructions& instructions) override;

  const Client& client(int id) const { return clients_[id]; }

  // Every client's kept state (FedBN's batch-norm values) as one string for
  // checkpoints, and back; LoadClientStates throws fedprof::Error when the
  // string does not fit these clients.
  std::string SaveClientStates() const;
  void LoadClientStates(const std::string& states);

 private:
  std::vector<Client> clients_;
  ThreadPool pool_;
  std::vector<std::shared_ptr<Model>> worker_models_;
};

}  // namespace fedprof

#endif  // FEDPROF_SIM_IN_PROCESS_TRANSPORT_H_
