#include "fedprof/transport/in_process.h"

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <mutex>
#include <numeric>

#include "fedprof/client/reports.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"
#include "fedprof/profiling/profiler.h"

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
  // FedBN's batch norm, and the client algorithm's state (algorithms/).
  const nlohmann::json states = {{"batch_norm", batch_norm_states_->Save(inline_states_)},
                                 {"algorithm", algorithm_states_->Save(inline_states_)}};
  return states.dump();
}

void InProcessTransport::LoadState(const std::string& text) {
  nlohmann::json states = {{"batch_norm", nlohmann::json::object()}, {"algorithm", nlohmann::json::object()}};
  try {
    if (!text.empty()) states = nlohmann::json::parse(text);
    if (!states.is_object()) throw Error("checkpoint: client states are not a JSON object");
    batch_norm_states_->Load(states.at("batch_norm"), num_clients());
    algorithm_states_->Load(states.at("algorithm"), num_clients());
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: client states: ") + e.what());
  }
}

void InProcessTransport::set_state_store(size_t budget_bytes, const std::string& spill_dir) {
  batch_norm_states_ = std::make_unique<ClientStateStore>(budget_bytes, spill_dir + "/batch_norm");
  algorithm_states_ = std::make_unique<ClientStateStore>(budget_bytes, spill_dir + "/algorithm");
}

Client& InProcessTransport::ClientFor(int id, std::optional<Client>* made) {
  if (!keep_clients_) return made->emplace(make_client_(id));
  // Distinct ids in one call: no two workers touch the same slot.
  std::optional<Client>& slot = kept_.at(id);
  if (!slot) slot.emplace(make_client_(id));
  return *slot;
}

namespace {

// Whether two profile-only tasks can share forward passes: the same θ, and
// the same answer format (plain, or encrypted under the same key).
bool SameProfileTask(const FitInstructions& a, const FitInstructions& b) {
  return a.global == b.global && a.model_version == b.model_version &&
         a.report.public_key == b.report.public_key &&
         a.report.secure_reference == b.report.secure_reference;
}

FitResult Failed(const std::exception& e) {
  FitResult r;
  r.ok = false;
  r.error = e.what();
  return r;
}

}  // namespace

void InProcessTransport::Fit(const std::vector<ClientInstructions>& tasks,
                             const ResultSink& sink) {
  if (profile_group_ > 1 && !tasks.empty() &&
      std::all_of(tasks.begin(), tasks.end(), [&](const ClientInstructions& t) {
        return ProfileOnly(t.instructions) &&
               SameProfileTask(t.instructions, tasks.front().instructions);
      })) {
    ProfileInGroups(tasks, sink);
    return;
  }
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
      Client& client = ClientFor(id, &made);
      client.set_local_state(batch_norm_states_->Get(id));
      client.set_algorithm_state(algorithm_states_->Get(id));
      // A report leaves the worker's model as loaded: the next client on this
      // worker can use it as it is (a million-client report pass loads the
      // model once per worker, not once per client).
      std::shared_ptr<const FlatParams>& loaded = worker_loaded_[worker];
      const bool holds = loaded == instructions.global && !instructions.objective.keep_local_batch_norm;
      loaded.reset();
      result = client.Fit(instructions, *worker_models_[worker], holds);
      if (instructions.train.epochs == 0 && !instructions.objective.keep_local_batch_norm) {
        loaded = instructions.global;
      }
      // The stores keep them: a client kept whole need not hold a copy too.
      if (!client.local_state().empty()) batch_norm_states_->Put(id, client.take_local_state());
      if (!client.algorithm_state().empty()) algorithm_states_->Put(id, client.take_algorithm_state());
      if (cost_) result.cost = cost_(id, instructions, result);
    } catch (const RunError&) {
      throw;  // ParallelFor rethrows it once the other clients are done
    } catch (const std::exception& e) {
      result = Failed(e);
    }
    result.client_id = id;
    std::lock_guard<std::mutex> lock(sink_mutex);
    (void)sink(static_cast<size_t>(i), std::move(result));
  });
}

void InProcessTransport::ProfileInGroups(const std::vector<ClientInstructions>& tasks,
                                         const ResultSink& sink) {
  const FitInstructions& ins = tasks.front().instructions;
  // The tasks in id order, cut where the group changes: one work item each.
  std::vector<size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tasks[a].client_id < tasks[b].client_id; });
  auto group = [&](size_t i) { return ProfileGroupOf(tasks[order[i]].client_id, profile_group_); };
  std::vector<size_t> starts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || group(i) != group(i - 1)) starts.push_back(i);
  }
  starts.push_back(order.size());

  // Rows of shared tables under θ, for this call: computed once each, by
  // whichever worker first needs them.
  std::optional<SharedRepresentations> shared;
  if (rows_of_) shared.emplace(tables_);
  std::mutex sink_mutex;
  pool_.ParallelFor(static_cast<int64_t>(starts.size() - 1), [&](int64_t item, int worker) {
    at::set_num_threads(1);
    const size_t begin = starts[item], end = starts[item + 1];
    std::vector<FitResult> results(end - begin);
    std::vector<std::optional<Client>> made(end - begin);
    std::vector<const Client*> small;  // profiled together
    std::vector<size_t> small_at;
    std::vector<TableRows> rows(end - begin);  // clients of shared inputs
    std::vector<int> shared_ids;
    std::vector<const TableRows*> shared_rows;
    std::vector<size_t> shared_at;
    Model& model = *worker_models_[worker];
    std::shared_ptr<const FlatParams>& loaded = worker_loaded_[worker];
    try {
      if (loaded != ins.global) {
        loaded.reset();
        Unflatten(*ins.global, model);
        loaded = ins.global;
      }
      for (size_t k = 0; k < results.size(); ++k) {
        const int id = tasks[order[begin + k]].client_id;
        try {
          if (shared && rows_of_(id, &rows[k]) &&
              static_cast<int64_t>(rows[k].rows.size()) < kProfileBatch) {
            shared_ids.push_back(id);
            shared_rows.push_back(&rows[k]);
            shared_at.push_back(k);
            continue;
          }
          const Client& client = ClientFor(id, &made[k]);
          if (client.num_samples() < kProfileBatch) {
            small.push_back(&client);
            small_at.push_back(k);
          } else {
            results[k] = std::move(ProfileTogether(ins, model, {&client})[0]);
          }
        } catch (const std::exception& e) {
          results[k] = Failed(e);
        }
      }
      std::vector<FitResult> together = ProfileTogether(ins, model, small);
      for (size_t j = 0; j < small_at.size(); ++j) results[small_at[j]] = std::move(together[j]);
      if (!shared_ids.empty()) {
        together = ProfileFromTables(ins, model, *shared, shared_ids, shared_rows);
        for (size_t j = 0; j < shared_at.size(); ++j) results[shared_at[j]] = std::move(together[j]);
      }
    } catch (const std::exception& e) {
      for (const std::vector<size_t>* at : {&small_at, &shared_at}) {
        for (size_t k : *at) {
          if (!results[k].ok) results[k] = Failed(e);  // not profiled yet
        }
      }
      if (loaded != ins.global) {  // θ never loaded: nothing was profiled
        for (FitResult& r : results) r = Failed(e);
      }
    }
    for (size_t k = 0; k < results.size(); ++k) {
      FitResult& r = results[k];
      r.client_id = tasks[order[begin + k]].client_id;
      if (r.ok && cost_) r.cost = cost_(r.client_id, ins, r);
    }
    std::lock_guard<std::mutex> lock(sink_mutex);
    for (size_t k = 0; k < results.size(); ++k) (void)sink(order[begin + k], std::move(results[k]));
  });
}

}  // namespace fedprof
