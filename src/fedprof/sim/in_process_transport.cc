#include "fedprof/sim/in_process_transport.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"

namespace fedprof {

InProcessTransport::InProcessTransport(std::vector<Client> clients, ModelFactory make_model,
                                       int num_threads)
    : clients_(std::move(clients)), pool_(num_threads) {
  for (int w = 0; w < pool_.size(); ++w) worker_models_.push_back(make_model());
}

ClientInfo InProcessTransport::Info(int client_id) const {
  const Client& c = clients_.at(client_id);
  return {c.id(), c.num_samples(), DataKindName(c.kind())};
}

std::string InProcessTransport::SaveClientStates() const {
  nlohmann::json states = nlohmann::json::array();
  for (const Client& c : clients_) states.push_back(EncodeFloats(c.local_state()));
  return states.dump();
}

void InProcessTransport::LoadClientStates(const std::string& text) {
  if (text.empty()) return;
  const nlohmann::json states = nlohmann::json::parse(text);
  if (!states.is_array() || states.size() != clients_.size()) {
    throw Error("checkpoint: client states do not match the " + std::to_string(clients_.size()) +
                " clients of this run");
  }
  for (size_t k = 0; k < clients_.size(); ++k) {
    clients_[k].set_local_state(DecodeFloats(states[k].get<std::string>()));
  }
}

std::vector<FitResult> InProcessTransport::Fit(const std::vector<int>& client_ids,
                                               const FitInstructions& instructions) {
  std::vector<FitResult> results(client_ids.size());
  pool_.ParallelFor(static_cast<int64_t>(client_ids.size()), [&](int64_t i, int worker) {
    // One intra-op thread per client: parallelism is across clients, and
    // per-op results then never depend on how work is split.
    at::set_num_threads(1);
    const int id = client_ids[i];
    try {
      results[i] = clients_.at(id).Fit(instructions, *worker_models_[worker]);
    } catch (const std::exception& e) {
      results[i].client_id = id;
      results[i].ok = false;
      results[i].error = e.what();
    }
  });
  return results;
}

}  // namespace fedprof
