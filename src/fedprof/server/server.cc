#include "fedprof/server/server.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/sim/transport.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

Server::Server(const ServerOptions& options, Transport& transport, Strategy& strategy,
               ModelReplicas& evaluator, const Dataset& test, RoundCostFn cost)
    : options_(options),
      transport_(transport),
      strategy_(strategy),
      evaluator_(evaluator),
      test_(test),
      cost_(std::move(cost)) {}

int Server::ClientsPerRound() const {
  const int n = transport_.num_clients();
  const int k = static_cast<int>(std::lround(n * options_.fraction));
  return std::max(1, std::min(n, k));
}

std::string Server::Validate(const FitResult& r, size_t num_params) {
  if (!r.ok) return r.error.empty() ? "client failed" : r.error;
  if (r.params.size() != num_params) {
    return "model has " + std::to_string(r.params.size()) + " values, expected " +
           std::to_string(num_params);
  }
  if (r.num_samples <= 0) return "reported " + std::to_string(r.num_samples) + " samples";
  for (size_t i = 0; i < r.params.size(); ++i) {
    if (!std::isfinite(r.params[i])) return "non-finite value at parameter index " + std::to_string(i);
  }
  if (!std::isfinite(r.train_loss)) return "non-finite training loss";
  return "";
}

std::vector<const FitResult*> Server::Usable(int64_t round, const std::vector<FitResult>& results,
                                            size_t num_params, int* skipped) const {
  std::vector<const FitResult*> usable;
  for (const FitResult& r : results) {
    std::string why = Validate(r, num_params);
    if (why.empty()) why = strategy_.CheckResult(r);
    if (!why.empty()) {
      std::fprintf(stderr, "round %lld: client %d skipped: %s\n", static_cast<long long>(round),
                   r.client_id, why.c_str());
      ++*skipped;
      continue;
    }
    usable.push_back(&r);
  }
  return usable;
}

void Server::Run(ServerState& state, const std::function<void(ServerState&)>& on_round,
                 double wall_offset_s) {
  const auto start = std::chrono::steady_clock::now();
  const int n = transport_.num_clients();
  std::vector<ClientInfo> infos;
  int64_t total_samples = 0;
  for (int i = 0; i < n; ++i) {
    infos.push_back(transport_.Info(i));
    total_samples += infos.back().num_samples;
  }
  if (state.times_selected.empty()) state.times_selected.assign(n, 0);
  // Each client's round time alone, for selectors that race clients (CFCFM).
  std::vector<double> expected_time;
  if (cost_) {
    for (int i = 0; i < n; ++i) expected_time.push_back(cost_({i}).time_s);
  }
  const Strategy::Reports reports = strategy_.WantedReports();
  if (state.round == 0) {
    strategy_.OnGlobalModel(state.global, 0);
    if (reports.any()) {
      // Initial reports of every client under the initial model (v = 0).
      FitInstructions ins;
      ins.global = std::make_shared<const FlatParams>(state.global);
      ins.profile = reports.profile;
      ins.report_loss = reports.loss;
      ins.train.epochs = 0;
      ins.seed = options_.seed;
      std::vector<int> everyone(n);
      for (int i = 0; i < n; ++i) everyone[i] = i;
      const std::vector<FitResult> initial = transport_.Fit(everyone, ins);
      int skipped = 0;
      strategy_.ObserveResults(Usable(0, initial, state.global.size(), &skipped));
    }
  } else {
    strategy_.LoadState(state.strategy_state);
    strategy_.OnGlobalModel(state.global, state.round);
  }

  for (int64_t round = state.round + 1; round <= options_.rounds; ++round) {
    RoundMetrics m;
    m.round = round;
    m.lr = options_.train.lr * std::pow(options_.lr_decay, static_cast<double>(round - 1));

    SelectionContext context{round, ClientsPerRound(), &infos,
                             expected_time.empty() ? nullptr : &expected_time};
    Rng rng = MakeRng(options_.seed, Stream::kSelection, {static_cast<uint64_t>(round)});
    const std::vector<int> selected = strategy_.ConfigureFit(context, rng);
    m.selected = static_cast<int>(selected.size());

    FitInstructions ins;
    ins.round = round;
    ins.global = std::make_shared<const FlatParams>(state.global);
    ins.model_version = round - 1;
    ins.profile = reports.profile;
    ins.report_loss = reports.loss;
    ins.prox_mu = strategy_.ProximalMu();
    ins.keep_local_batch_norm = strategy_.KeepsLocalBatchNorm();
    ins.train = options_.train;
    ins.train.lr = m.lr;
    ins.seed = options_.seed;
    const std::vector<FitResult> results = transport_.Fit(selected, ins);

    const std::vector<const FitResult*> valid =
        Usable(round, results, state.global.size(), &m.skipped);
    double loss_sum = 0;
    for (const FitResult* r : valid) loss_sum += r->train_loss;
    for (int id : selected) ++state.times_selected[id];
    m.train_loss = valid.empty() ? 0 : loss_sum / static_cast<double>(valid.size());

    strategy_.ObserveResults(valid);
    FlatParams next;
    strategy_.AggregateFit(state.global, valid, total_samples, &next);
    state.global = std::move(next);
    strategy_.OnGlobalModel(state.global, round);
    state.strategy_state = strategy_.SaveState();

    if (cost_) {
      const RoundCost c = cost_(selected);
      m.round_time_s = c.time_s;
      m.round_energy_wh = c.energy_j / 3600.0;
      m.profiling_time_s = c.profiling_time_s;
      m.profiling_energy_wh = c.profiling_energy_j / 3600.0;
      state.virtual_time_s += c.time_s;
      state.energy_j += c.energy_j;
    }
    m.virtual_time_s = state.virtual_time_s;
    m.energy_wh = state.energy_j / 3600.0;

    if (round % options_.eval_every == 0 || round == options_.rounds) {
      evaluator_.Load(state.global);
      const EvalResult e = Evaluate(evaluator_, test_, options_.eval_batch_size);
      m.evaluated = true;
      m.accuracy = e.accuracy;
      m.loss = e.loss;
      m.rmse = e.rmse;
    }
    m.wall_s = wall_offset_s +
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.history.push_back(m);
    state.round = round;

    if (options_.progress) {
      char acc[64] = "      -", loss[64] = "      -";
      if (m.evaluated) {
        std::snprintf(acc, sizeof(acc), "%.4f", m.accuracy);
        std::snprintf(loss, sizeof(loss), "%.4f", m.loss);
      }
      std::printf("round %4lld/%lld  acc %s  loss %s  vtime %9.1f s  energy %8.3f Wh  wall %6.1f s\n",
                  static_cast<long long>(round), static_cast<long long>(options_.rounds), acc,
                  loss, m.virtual_time_s, m.energy_wh, m.wall_s);
      std::fflush(stdout);
    }
    if (on_round) on_round(state);
  }
}

}  // namespace fedprof
