#include "fedprof/server/server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "fedprof/client/client.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/text.h"
#include "fedprof/models/replicas.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

// What one round's results came to.
struct Server::Tally {
  int selected = 0;
  int returned = 0;  // usable results
  int refused = 0;
  int timed_out = 0;
  int online = 0;  // clients available when the round started
  ExactSum train_loss;
  double time_s = 0;                 // the slowest client (Eq. 27)
  double time_without_profiling_s = 0;
  ExactSum energy_j;  // exact sums: the order results arrive in changes no bit
  ExactSum profiling_energy_j;
};

Server::Server(const ServerOptions& options, Transport& transport, Strategy& strategy,
               ModelReplicas& evaluator, const Dataset& test, RunObserver* observer)
    : options_(options),
      transport_(transport),
      strategy_(strategy),
      evaluator_(evaluator),
      test_(test),
      observer_(observer) {}

int Server::ClientsPerRound() const {
  const int n = transport_.num_clients();
  const int k = static_cast<int>(std::lround(n * options_.fraction));
  return std::max(1, std::min(n, k));
}

namespace {

// Every number a client sends is finite, or its result is refused whole;
// what is not, or "". (The model's values are Validate's.)
std::string NonFiniteNumber(const FitResult& r) {
  if (!std::isfinite(r.train_loss) || !std::isfinite(r.pre_train_loss) || !std::isfinite(r.train_loss_rms)) {
    return "a non-finite loss";
  }
  if (r.profile) {
    for (size_t u = 0; u < r.profile->mean.size(); ++u) {
      if (!std::isfinite(r.profile->mean[u]) || !std::isfinite(r.profile->var[u]) ||
          r.profile->var[u] < 0) {
        return "profile unit " + std::to_string(u) + " is not a finite mean and variance";
      }
    }
  }
  for (float v : r.sketch) {
    if (!std::isfinite(v)) return "a non-finite value in its update sketch";
  }
  const ResultCost& c = r.cost;
  if (!std::isfinite(c.time_s) || !std::isfinite(c.energy_j) || !std::isfinite(c.profiling_time_s) ||
      !std::isfinite(c.profiling_energy_j)) {
    return "a non-finite cost";
  }
  return "";
}

}  // namespace

std::string Server::Validate(const FitResult& r, size_t num_params, bool expect_model) {
  if (!r.ok) return r.error.empty() ? "client failed" : r.error;
  if (r.num_samples < 1 || r.num_samples > kMaxClaimedSamples) {
    return "claims " + std::to_string(r.num_samples) + " samples, outside [1, " +
           std::to_string(kMaxClaimedSamples) + "]";
  }
  const std::string numbers = NonFiniteNumber(r);
  if (!expect_model) return numbers;
  if (r.params.size() != num_params) {
    return "model has " + std::to_string(r.params.size()) + " values, expected " +
           std::to_string(num_params);
  }
  const double n = static_cast<double>(r.num_samples);
  // One pass without early exits (it vectorises; NaN and ±inf fail the
  // bound too), and only for a model that fails, the first culprit.
  bool bounded = true;
  for (const float v : r.params) bounded &= std::fabs(n * v) < kMaxModelSumTerm;
  for (size_t i = 0; !bounded && i < r.params.size(); ++i) {
    if (!std::isfinite(r.params[i])) return "non-finite value at parameter index " + std::to_string(i);
    if (!(std::fabs(n * r.params[i]) < kMaxModelSumTerm)) {
      return "parameter " + std::to_string(i) + " times the sample count is beyond 2^40";
    }
  }
  if (!(std::fabs(r.train_loss) < kMaxModelSumTerm)) return "non-finite training loss";
  return numbers;
}

std::string Server::CheckProfileVersion(const FitResult& r, int64_t sent) {
  if (!r.profile || r.profile->version == sent) return "";
  return "profile of model version " + std::to_string(r.profile->version) + ", not the version " +
         std::to_string(sent) + " the server sent";
}

std::string Server::CheckTrained(FitResult* r, const FlatParams& sent, int64_t version) const {
  std::string why = Validate(*r, sent.size(), /*expect_model=*/!r->summed);
  if (why.empty()) why = CheckProfileVersion(*r, version);
  if (why.empty() && r->summed && !strategy_.NeedsEveryModel().empty()) {
    why = "its model comes only in a sum, but " + strategy_.NeedsEveryModel();
  }
  if (why.empty()) why = strategy_.CheckResult(*r);
  if (why.empty() && strategy_.Algorithm()) why = strategy_.Algorithm()->Check(*r, sent.size());
  if (why.empty() && !r->summed) why = strategy_.BoundUpdate(sent, r);
  return why;
}

std::string Server::ValidateEvaluation(const FitResult& r) {
  if (r.eval_samples != r.num_samples) {
    return "evaluated " + std::to_string(r.eval_samples) + " samples of its " +
           std::to_string(r.num_samples);
  }
  if (r.eval_correct < 0 || r.eval_correct > r.eval_samples) {
    return "reports " + std::to_string(r.eval_correct) + " correct answers of " +
           std::to_string(r.eval_samples) + " samples";
  }
  if (!(r.eval_loss >= 0 && r.eval_loss * static_cast<double>(r.eval_samples) < kMaxModelSumTerm)) {
    return "evaluation loss " + FormatDouble(r.eval_loss) + " is not finite, or negative, or too large";
  }
  return "";
}

void Server::EvaluateFederated(int64_t round, const FlatParams& global, RoundMetrics* m) {
  evaluations_.clear();
  std::vector<ClientInfo> available = transport_.Available();
  if (available.empty()) return;
  const int n = static_cast<int>(available.size());
  const int k = std::max(1, std::min(n, static_cast<int>(std::lround(
                                            n * options_.federated_eval_fraction))));
  SelectionContext context{round, k, &available};
  Rng rng = MakeRng(options_.seed, Stream::kFederatedEvaluation, {static_cast<uint64_t>(round)});
  TaskSetup setup;
  setup.round = round;
  setup.global = std::make_shared<const FlatParams>(global);
  setup.model_version = round;
  setup.seed = options_.seed;
  const std::vector<ClientInstructions> asked = strategy_.ConfigureEvaluate(context, rng, setup);
  transport_.Fit(asked, [&](size_t, FitResult&& r) -> std::string {
    std::string why = Validate(r, global.size(), /*expect_model=*/false);
    if (why.empty()) why = ValidateEvaluation(r);
    if (!why.empty()) {
      LogWarning("round " + std::to_string(round) + ": evaluation by client " +
                 std::to_string(r.client_id) + (r.timed_out ? " timed out: " : " refused: ") + why);
      return why;
    }
    evaluations_.push_back({r.client_id, r.eval_samples, r.eval_correct, r.eval_loss});
    return "";
  });
  std::sort(evaluations_.begin(), evaluations_.end(),
            [](const ClientEvaluation& a, const ClientEvaluation& b) {
              return a.client_id < b.client_id;
            });
  if (evaluations_.empty()) return;
  const Strategy::Evaluation e = strategy_.AggregateEvaluate(round, evaluations_);
  m->fed_evaluated = true;
  m->fed_clients = e.clients;
  m->fed_accuracy = e.accuracy;
  m->fed_loss = e.loss;
}

// One attempt's results as they arrive: each checked and folded into the
// server's sum and the tally; a relay's partial sum checked against the
// accepted results it names, whose models it carries.
class Server::ResultFold {
 public:
  ResultFold(Server& server, int64_t round, const FlatParams& global, Tally* tally)
      : server_(server), round_(round), global_(global), tally_(tally) {}

  std::string Take(size_t index, FitResult&& r) {
    tally_->time_s = std::max(tally_->time_s, r.cost.time_s);
    tally_->time_without_profiling_s =
        std::max(tally_->time_without_profiling_s, r.cost.time_s - r.cost.profiling_time_s);
    tally_->energy_j.Add(r.cost.energy_j);
    tally_->profiling_energy_j.Add(r.cost.profiling_energy_j);
    const std::string why = server_.CheckTrained(&r, global_, round_ - 1);
    if (RunObserver* observer = server_.observer_) {
      observer->AddResult(r.client_id, why.empty(), r.timed_out, why, r.cost.time_s);
    }
    if (!why.empty()) {
      ++(r.timed_out ? tally_->timed_out : tally_->refused);
      LogWarning("round " + std::to_string(round_) + ": client " + std::to_string(r.client_id) +
                 (r.timed_out ? " timed out: " : " refused: ") + why);
      return why;
    }
    ++tally_->returned;
    server_.strategy_.Observe(r);
    tally_->train_loss.Add(r.train_loss);
    if (r.summed) {
      awaiting_[index] = {r.client_id, server_.strategy_.AggregationWeight(r), r.train_loss};
      return "";
    }
    server_.sum_.Add(r.params, server_.strategy_.AggregationWeight(r));
    if (ServerAlgorithm* algorithm = server_.strategy_.Algorithm()) algorithm->Observe(r, global_);
    if (server_.strategy_.NeedsUpdates()) {
      server_.updates_.push_back({r.client_id, r.num_samples, std::move(r.params)});
    }
    return "";
  }

  // A relay's partial sum must be the sum of exactly the accepted results
  // it names: their count and their registered weights.
  std::string TakeSum(const std::vector<size_t>& indices, const ModelSum* part, const std::string& lost) {
    std::vector<size_t> sorted = indices;
    std::sort(sorted.begin(), sorted.end());
    std::string why = CheckSum(sorted, part, lost);
    if (why.empty()) {
      try {
        server_.sum_.Merge(*part);
      } catch (const Error& e) {
        why = e.what();
      }
    }
    for (size_t i : sorted) {
      if (why.empty()) {
        awaiting_.erase(i);
      } else {
        // A sum that never came is a time-out; one refused (lost, with why) is a refusal.
        Lose(i, why, /*timed_out=*/part == nullptr && lost.empty());
      }
    }
    return why;
  }

  // The accepted results whose sums never came no longer count.
  void LoseAwaiting() {
    while (!awaiting_.empty()) Lose(awaiting_.begin()->first, "its partial sum never came", true);
  }

 private:
  // Accepted results whose models come in a relay's partial sum.
  struct Awaiting {
    int client_id = -1;
    int64_t weight = 0;  // its weight in the sum (Strategy::AggregationWeight)
    double train_loss = 0;
  };

  std::string CheckSum(const std::vector<size_t>& sorted, const ModelSum* part,
                       const std::string& lost) const {
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return "it names a result twice";
    int64_t weight = 0;
    for (size_t i : sorted) {
      const auto it = awaiting_.find(i);
      if (it == awaiting_.end()) return "it names a result that awaits no sum";
      weight += it->second.weight;
    }
    if (part == nullptr) return lost.empty() ? "its relay was lost before it sent the sum" : lost;
    if (part->size() != global_.size() || part->count() != static_cast<int64_t>(sorted.size()) ||
        part->weight() != weight) {
      return "a partial sum of " + std::to_string(part->count()) + " models of weight " +
             std::to_string(part->weight()) + ", not of the " + std::to_string(sorted.size()) +
             " accepted results it names (weight " + std::to_string(weight) + ")";
    }
    return "";
  }

  // An accepted result whose model is lost (its relay's sum never came, or
  // was refused) no longer counts in the round.
  void Lose(size_t index, const std::string& why, bool timed_out) {
    const auto it = awaiting_.find(index);
    if (it == awaiting_.end()) return;
    --tally_->returned;
    ++(timed_out ? tally_->timed_out : tally_->refused);
    tally_->train_loss.Add(-it->second.train_loss);  // exact: undoes its Add
    LogWarning("round " + std::to_string(round_) + ": client " + std::to_string(it->second.client_id) +
               "'s model is lost: " + why);
    awaiting_.erase(it);
  }

  Server& server_;
  const int64_t round_;
  const FlatParams& global_;
  Tally* const tally_;
  std::map<size_t, Awaiting> awaiting_;  // by task index, until their sum is in
};

void Server::TrainSelected(int64_t round, const std::vector<ClientInstructions>& selected,
                           const FlatParams& global, Tally* tally) {
  tally->selected += static_cast<int>(selected.size());
  ResultFold fold(*this, round, global, tally);
  transport_.Fit(selected, Transport::ResultSink(
                               [&](size_t index, FitResult&& r) { return fold.Take(index, std::move(r)); },
                               [&](const std::vector<size_t>& indices, const ModelSum* part,
                                   const std::string& lost) { return fold.TakeSum(indices, part, lost); }));
  fold.LoseAwaiting();
}

void Server::CollectReports(const std::vector<ClientInfo>& available, const FlatParams& global,
                            int64_t version) {
  std::vector<int> pending;
  for (const ClientInfo& c : available) {
    if (!strategy_.HasReport(c.id)) pending.push_back(c.id);
  }
  if (pending.empty()) return;
  TaskSetup setup;
  setup.round = version;
  setup.global = std::make_shared<const FlatParams>(global);
  setup.model_version = version;
  setup.seed = options_.seed;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ClientInstructions> tasks = strategy_.ConfigureReports(pending, setup);
  transport_.Fit(tasks, [&](size_t, FitResult&& r) -> std::string {
    std::string why = Validate(r, global.size(), /*expect_model=*/false);
    if (why.empty()) why = CheckProfileVersion(r, version);
    if (why.empty()) why = strategy_.CheckResult(r);
    if (!why.empty()) {
      LogWarning("report of client " + std::to_string(r.client_id) + " under model version " +
                 std::to_string(version) + " refused: " + why);
      return why;
    }
    strategy_.Observe(r);
    return "";
  });
  if (options_.progress) {
    char line[160];
    std::snprintf(line, sizeof(line), "reports of %zu clients under model version %lld in %.1f s",
                  pending.size(), static_cast<long long>(version),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    LogProgress(line);
  }
}

void Server::Resume(ServerState& state) {
  const int n = transport_.num_clients();
  if (state.times_selected.empty()) state.times_selected.assign(n, 0);
  if (state.times_selected.size() != static_cast<size_t>(n)) {
    throw Error("checkpoint: holds " + std::to_string(state.times_selected.size()) +
                " clients, the run " + std::to_string(n));
  }
  if (state.round > 0) strategy_.LoadState(state.strategy_state);
  strategy_.OnGlobalModel(state.global, state.round);
}

void Server::Run(ServerState& state, const std::function<void(ServerState&)>& on_round,
                 double wall_offset_s) {
  if (strategy_.Buffered() != nullptr) {
    RunBuffered(state, on_round, wall_offset_s);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  Resume(state);
  for (int64_t round = state.round + 1; round <= options_.rounds; ++round) {
    if (const DpFedAvg* dp = strategy_.Dp(); dp && !dp->MayRunAnotherRound()) {
      LogProgress("round " + std::to_string(round) + " would take epsilon to " +
                  FormatDouble(dp->NextEpsilon(), "%.4g") +
                  ", beyond dp.target_epsilon = " + FormatDouble(dp->options().target_epsilon) +
                  ": the run stops after round " + std::to_string(round - 1));
      break;
    }
    PhaseTimer phase(observer_, "select");  // the round-time breakdown of --monitor
    RoundMetrics m;
    m.round = round;
    m.lr = LearningRate(round);
    Tally tally;
    const std::optional<int64_t> total_samples = TrainRound(round, m.lr, state, &phase, &tally);
    if (!total_samples) break;
    m.selected = tally.selected;
    m.returned = tally.returned;
    m.refused = tally.refused;
    m.timed_out = tally.timed_out;
    m.online = tally.online;
    m.train_loss = !options_.train_loss_reported ? std::numeric_limits<double>::quiet_NaN()
                   : tally.returned == 0         ? 0
                                                 : tally.train_loss.value() / tally.returned;

    phase.Next("aggregate");
    FlatParams next;
    if (const DpFedAvg* dp = strategy_.Dp()) m.dp_clip_norm = dp->ClipNorm();
    strategy_.AggregateFit(state.global, sum_, updates_, *total_samples, &next);
    if (ServerAlgorithm* algorithm = strategy_.Algorithm()) {
      algorithm->Finish(state.global, transport_.num_clients(), &next);
    }
    m.fell_back = strategy_.FellBack();
    state.global = std::move(next);
    strategy_.OnGlobalModel(state.global, round);
    state.strategy_state = strategy_.SaveState();
    if (const DpFedAvg* dp = strategy_.Dp()) {
      m.dp_unclipped = dp->LastUnclippedShare();
      m.dp_epsilon = dp->Epsilon();
      const auto most = std::max_element(state.times_selected.begin(), state.times_selected.end());
      m.dp_epsilon_server = dp->EpsilonAgainstServer(most == state.times_selected.end() ? 0 : *most);
    }

    m.round_time_s = tally.time_s;
    m.round_energy_wh = tally.energy_j.value() / 3600.0;
    m.profiling_time_s = tally.time_s - tally.time_without_profiling_s;
    m.profiling_energy_wh = tally.profiling_energy_j.value() / 3600.0;
    state.virtual_time_s += tally.time_s;
    state.energy_j += tally.energy_j.value();
    m.virtual_time_s = state.virtual_time_s;
    m.energy_wh = state.energy_j / 3600.0;

    phase.Next("evaluate");
    EvaluateRound(round, state.global, &m);
    m.wall_s =
        wall_offset_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    phase.Stop();
    state.history.push_back(m);
    state.round = round;
    if (options_.progress) LogRound(m);
    if (on_round) on_round(state);
  }
}

double Server::LearningRate(int64_t round) const {
  return options_.train.lr * std::pow(options_.lr_decay, static_cast<double>(round - 1));
}

std::optional<int64_t> Server::TrainRound(int64_t round, double lr, ServerState& state, PhaseTimer* phase,
                                          Tally* tally) {
  TaskSetup setup;
  setup.round = round;
  setup.global = std::make_shared<const FlatParams>(state.global);
  setup.model_version = round - 1;
  setup.train = options_.train;
  setup.train.lr = lr;
  setup.seed = options_.seed;
  sum_.Reset(state.global.size());
  updates_.clear();
  int64_t total_samples = -1;  // |D| of the clients available when the round starts
  std::vector<char> asked(transport_.num_clients(), 0);
  transport_.SetVirtualTime(state.virtual_time_s);
  for (int attempt = 0;; ++attempt) {
    // A retry selects among the clients not yet asked this round, and waits
    // for one when none is left.
    std::vector<ClientInfo> available =
        transport_.AvailableOrWait([&asked](int id) { return asked.at(static_cast<size_t>(id)) == 0; });
    if (attempt == 0) tally->online = static_cast<int>(available.size());
    available.erase(std::remove_if(available.begin(), available.end(),
                                   [&](const ClientInfo& c) { return asked.at(c.id) != 0; }),
                    available.end());
    if (strategy_.WantedReports().any()) CollectReports(available, state.global, round - 1);
    if (total_samples < 0) {
      total_samples = 0;
      for (const ClientInfo& c : available) total_samples += c.num_samples;
    }
    const int wanted = ClientsPerRound() - tally->returned;
    const int k = std::min(static_cast<int>(std::ceil(wanted * options_.overcommit - 1e-9)),
                           static_cast<int>(available.size()));
    SelectionContext context{round, k, &available};
    const uint64_t r = static_cast<uint64_t>(round);
    Rng rng = NoiseRng(
        options_.sample_source, "sample",
        std::to_string(options_.seed) + " " + std::to_string(round) + " " + std::to_string(attempt),
        attempt == 0 ? MakeRng(options_.seed, Stream::kSelection, {r})
                     : MakeRng(options_.seed, Stream::kSelection, {r, static_cast<uint64_t>(attempt)}));
    const std::vector<ClientInstructions> selected =
        k > 0 ? strategy_.ConfigureFit(context, rng, setup) : std::vector<ClientInstructions>();
    const auto n = static_cast<int64_t>(selected.size());
    if (const DpFedAvg* dp = strategy_.Dp(); dp && !dp->MayReleaseSumOf(n)) {
      const int64_t fewest = dp->FewestInSum(n);
      LogProgress("round " + std::to_string(round) + ": the sum of its " + std::to_string(n) +
                  " selected clients may hold as few as " + std::to_string(fewest) +
                  " (secure aggregation unmasks no fewer), which would take epsilon to " +
                  FormatDouble(dp->EpsilonWithNextSum(n, fewest), "%.4g") +
                  ", beyond dp.target_epsilon = " + FormatDouble(dp->options().target_epsilon) +
                  ": the run stops after round " + std::to_string(round - 1));
      return std::nullopt;
    }
    for (const ClientInstructions& c : selected) {
      ++state.times_selected.at(c.client_id);
      asked.at(c.client_id) = 1;
    }
    phase->Next("train");
    TrainSelected(round, selected, state.global, tally);
    phase->Next("select");
    if (options_.min_results <= 0 || tally->returned >= options_.min_results) return total_samples;
    const std::string shortfall = "round " + std::to_string(round) + ": " + std::to_string(tally->returned) +
                                  " usable results, fewer than the quorum of " +
                                  std::to_string(options_.min_results) + " (deploy.min_results)";
    if (attempt + 1 >= options_.round_attempts) {
      throw Error(shortfall + " after " + std::to_string(options_.round_attempts) +
                  " attempts; the checkpoint holds round " + std::to_string(state.round));
    }
    LogWarning(shortfall + "; selecting more clients");
  }
}

void Server::EvaluateRound(int64_t round, const FlatParams& global, RoundMetrics* m) {
  if (round % options_.eval_every == 0 || round == options_.rounds) {
    evaluator_.Load(global);
    const EvalResult e = Evaluate(evaluator_, test_, options_.eval_batch_size);
    m->evaluated = true;
    m->accuracy = e.accuracy;
    m->loss = e.loss;
    m->rmse = e.rmse;
    if (triggered_) {
      m->backdoor_evaluated = true;
      m->backdoor_success = Evaluate(evaluator_, *triggered_, options_.eval_batch_size).accuracy;
    }
  }
  evaluations_.clear();
  if (options_.federated_eval_every > 0 &&
      (round % options_.federated_eval_every == 0 || round == options_.rounds)) {
    EvaluateFederated(round, global, m);
  }
}

void Server::LogRound(const RoundMetrics& m) const { LogProgress(ProgressLine(m, options_.rounds)); }

}  // namespace fedprof
