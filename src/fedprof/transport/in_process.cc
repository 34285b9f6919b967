#include "fedprof/transport/in_process.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"

namespace fedprof {

InProcessTransport::InProcessTransport(std::vector<ClientInfo> infos, ClientFactory make_client,
                                       bool keep_clients, ModelFactory make_model,
                                       int num_threads, CostFn cost)
    : infos_(std::move(infos)),
      make_client_(std::move(make_client)),
      keep_clients_(keep_clients),
      cost_(std::move(cost)),
      pool_(num_threads) {
  for (int w = 0; w < pool_.size(); ++w) worker_models_.push_back(make_model());
  worker_loaded_.resize(worker_models_.size());
  if (keep_clients_) kept_.resize(infos_.size());
}

std::string InProcessTransport::SaveState() {
  std::lock_guard<std::mutex> lock(states_mutex_);
  nlohmann::json states = nlohmann::json::object();
  for (const auto& [id, state] : local_states_) states[std::to_string(id)] = EncodeFloats(state);
  return states.dump();
}

void InProcessTransport::LoadState(const std::string& text) {
  std::lock_guard<std::mutex> lock(states_mutex_);
  local_states_.clear();
  if (text.empty()) return;
  try {
    const nlohmann::json states = nlohmann::json::parse(text);
    if (!states.is_object()) throw Error("checkpoint: client states are not a JSON object");
    for (const auto& [key, value] : states.items()) {
      const int id = ParseClientId(key, num_clients());
      if (id < 0) {
        throw Error("checkpoint: state of client '" + Printable(key) + "', not one of the " +
                    std::to_string(num_clients()) + " clients of this run");
      }
      local_states_[id] = DecodeFloats(value.get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: client states: ") + e.what());
  }
}

void InProcessTransport::Fit(const std::vector<ClientInstructions>& tasks,
                             const ResultSink& sink) {
  std::mutex sink_mutex;
  pool_.ParallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t i, int worker) {
    // One intra-op thread per client: parallelism is across clients, and
    // per-op results then never depend on how work is split.
    at::set_num_threads(1);
    const int id = tasks[i].client_id;
    const FitInstructions& instructions = tasks[i].instructions;
    FitResult result;
    try {
      std::optional<Client> made;
      Client* client = nullptr;
      if (keep_clients_) {
        // Distinct ids in one call: no two workers touch the same slot.
        std::optional<Client>& slot = kept_.at(id);
        if (!slot) slot.emplace(make_client_(id));
        client = &*slot;
      } else {
        made.emplace(make_client_(id));
        client = &*made;
      }
      {
        std::lock_guard<std::mutex> lock(states_mutex_);
        const auto it = local_states_.find(id);
        client->set_local_state(it == local_states_.end() ? FlatParams() : it->second);
      }
      // A report leaves the worker's model as loaded: the next client on this
      // worker can use it as it is (a million-client report pass loads the
      // model once per worker, not once per client).
      std::shared_ptr<const FlatParams>& loaded = worker_loaded_[worker];
      const bool holds = loaded == instructions.global && !instructions.objective.keep_local_batch_norm;
      loaded.reset();
      result = client->Fit(instructions, *worker_models_[worker], holds);
      if (instructions.train.epochs == 0 && !instructions.objective.keep_local_batch_norm) {
        loaded = instructions.global;
      }
      if (!client->local_state().empty()) {
        std::lock_guard<std::mutex> lock(states_mutex_);
        local_states_[id] = client->local_state();
      }
      if (cost_) result.cost = cost_(id, instructions);
    } catch (const std::exception& e) {
      result = FitResult();
      result.ok = false;
      result.error = e.what();
    }
    result.client_id = id;
    std::lock_guard<std::mutex> lock(sink_mutex);
    (void)sink(static_cast<size_t>(i), std::move(result));
  });
}

}  // namespace fedprof
