#include "fedprof/selection/oort_selector.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

double OortExploration(const OortOptions& options, int64_t round) {
  const double decayed = options.exploration * std::pow(options.exploration_decay,
                                                        static_cast<double>(std::max<int64_t>(0, round - 1)));
  return std::max(decayed, options.exploration_min);
}

OortScale OortUtilityScale(std::vector<double> utilities, double clip_quantile) {
  OortScale s;
  if (utilities.empty()) return s;
  std::sort(utilities.begin(), utilities.end());
  const size_t n = utilities.size();
  const auto at = std::min(n - 1, static_cast<size_t>(static_cast<double>(n) * clip_quantile));
  s.clip = utilities[at];
  // As the authors' implementation scales: the lowest utility maps just above
  // 0, so that every explored client keeps a chance.
  s.low = utilities.front() * 0.999;
  s.range = std::max(std::min(utilities.back(), s.clip) - s.low, 1e-4);
  return s;
}

double OortScore(double utility, const OortScale& scale, int64_t round, int64_t last_round, double duration_s,
                 double preferred_s, double penalty) {
  double score = (std::min(utility, scale.clip) - scale.low) / scale.range +
                 std::sqrt(0.1 * std::log(static_cast<double>(round)) / static_cast<double>(last_round));
  if (duration_s > preferred_s) score *= std::pow(preferred_s / duration_s, penalty);
  return score;
}

double OortPacer(const std::vector<double>& per_round, int64_t round, int window, double step,
                 double percentile) {
  const int64_t done = round - 1;
  if (window <= 0 || done < 2 * window || done % window != 0 ||
      static_cast<int64_t>(per_round.size()) < done) {
    return percentile;
  }
  const auto sum = [&](int64_t from, int64_t to) {  // rounds (from, to]
    return std::accumulate(per_round.begin() + from, per_round.begin() + to, 0.0);
  };
  const double before = sum(done - 2 * window, done - window), last = sum(done - window, done);
  return before > last ? std::min(100.0, percentile + step) : percentile;
}

OortSelector::OortSelector(const OortOptions& options, int num_clients)
    : options_(options),
      utility_(num_clients, 0.0),
      last_round_(num_clients, 0),
      times_(num_clients, 0),
      percentile_(options.duration_percentile) {}

namespace {

// The `percentile` (0-100) of the known round times (> 0); infinity when
// there are none or percentile >= 100.
double DurationAt(const std::vector<ClientInfo>& clients, double percentile) {
  if (percentile >= 100) return std::numeric_limits<double>::infinity();
  std::vector<double> times;
  times.reserve(clients.size());
  for (const ClientInfo& c : clients) {
    if (c.expected_time_s > 0) times.push_back(c.expected_time_s);
  }
  if (times.empty()) return std::numeric_limits<double>::infinity();
  const auto at =
      std::min(times.size() - 1, static_cast<size_t>(static_cast<double>(times.size()) * percentile / 100));
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(at), times.end());
  return times[at];
}

// Exploration ranks unexplored clients by this (the authors' initial
// reward: data size, with the system penalty), sampling among the top
// kSampleWindow times as many as it needs.
constexpr double kSampleWindow = 5;

}  // namespace

std::vector<int> OortSelector::Select(const SelectionContext& context, Rng& rng) {
  const std::vector<ClientInfo>& clients = *context.clients;
  const int64_t round = std::max<int64_t>(1, context.round);
  const int k = std::min<int>(context.num_to_select, static_cast<int>(clients.size()));
  round_ = round;
  if (per_round_.size() < static_cast<size_t>(round)) per_round_.resize(static_cast<size_t>(round), 0.0);
  if (paced_round_ < round) {  // once per round, whatever the round's attempts
    percentile_ = OortPacer(per_round_, round, options_.pacer_window, options_.pacer_step, percentile_);
    paced_round_ = round;
  }
  preferred_s_ = DurationAt(clients, percentile_);
  const auto penalised = [&](double value, double duration_s) {
    return duration_s > preferred_s_ ? value * std::pow(preferred_s_ / duration_s, options_.penalty) : value;
  };

  std::vector<int> explored, unexplored;  // indices into clients
  std::vector<double> utilities;
  for (int i = 0; i < static_cast<int>(clients.size()); ++i) {
    if (times_.at(clients[i].id) > 0) {
      explored.push_back(i);
      utilities.push_back(utility_[clients[i].id]);
    } else {
      unexplored.push_back(i);
    }
  }
  const OortScale scale = OortUtilityScale(utilities, options_.clip_quantile);
  scores_.assign(utility_.size(), 0.0);
  std::vector<double> score(explored.size());
  for (size_t j = 0; j < explored.size(); ++j) {
    const ClientInfo& c = clients[explored[j]];
    score[j] = OortScore(utility_[c.id], scale, round, last_round_[c.id], c.expected_time_s, preferred_s_,
                         options_.penalty);
    scores_[c.id] = score[j];
  }

  // Exploitation: (1 − ε)K of the explored clients (all K once none is left
  // to explore), drawn by score among those within c of the last one's.
  const double epsilon = unexplored.empty() ? 0.0 : OortExploration(options_, round);
  const int exploit =
      std::min(static_cast<int>(std::floor(k * (1 - epsilon) + 1e-9)), static_cast<int>(explored.size()));
  std::vector<int> picked;
  if (exploit > 0) {
    std::vector<double> ranked = score;  // the exploit-th highest, in O(n)
    std::nth_element(ranked.begin(), ranked.begin() + (exploit - 1), ranked.end(), std::greater<double>());
    const double cut = ranked[exploit - 1] * options_.cut_off;
    std::vector<double> weights(explored.size(), 0.0);
    for (size_t j = 0; j < explored.size(); ++j) weights[j] = score[j] >= cut ? score[j] : 0.0;
    for (int j : SampleByWeight(weights, exploit, /*with_replacement=*/false, rng))
      picked.push_back(explored[j]);
  }
  // Exploration: the rest from the unexplored clients, by size and speed.
  const int explore = std::min(static_cast<int>(unexplored.size()), k - static_cast<int>(picked.size()));
  if (explore > 0) {
    std::vector<double> reward(unexplored.size());
    for (size_t j = 0; j < unexplored.size(); ++j) {
      const ClientInfo& c = clients[unexplored[j]];
      reward[j] = penalised(static_cast<double>(std::max<int64_t>(1, c.num_samples)), c.expected_time_s);
    }
    std::vector<int> order(unexplored.size());
    std::iota(order.begin(), order.end(), 0);
    const auto window = std::min(order.size(), static_cast<size_t>(kSampleWindow * explore));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(window), order.end(),
                      [&](int a, int b) { return reward[a] != reward[b] ? reward[a] > reward[b] : a < b; });
    std::vector<double> weights(unexplored.size(), 0.0);
    for (size_t w = 0; w < window; ++w) weights[order[w]] = reward[order[w]];
    for (int j : SampleByWeight(weights, explore, /*with_replacement=*/false, rng))
      picked.push_back(unexplored[j]);
  }
  // Short of K (scores of 0): the rest uniformly from the clients not picked.
  if (static_cast<int>(picked.size()) < k) {
    std::vector<double> rest(clients.size(), 1.0);
    for (int i : picked) rest[i] = 0;
    for (int i : SampleByWeight(rest, k - static_cast<int>(picked.size()), false, rng)) picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end());
  return IdsAt(context, picked);
}

std::string OortSelector::CheckResult(const FitResult& result) const {
  if (!(result.train_loss_rms >= 0 && result.train_loss_rms <= kMaxLossRms)) {
    return "loss RMS " + FormatDouble(result.train_loss_rms) + " outside [0, 1e6]";
  }
  return "";
}

void OortSelector::Observe(const FitResult& result) {
  if (result.params.empty() && !result.summed) return;  // a report: nothing trained
  const int id = result.client_id;
  const double utility = static_cast<double>(result.num_samples) * result.train_loss_rms;
  utility_.at(id) = utility;
  last_round_.at(id) = round_;
  ++times_.at(id);
  if (round_ >= 1) per_round_.at(static_cast<size_t>(round_ - 1)) += utility;
}

std::string OortSelector::SaveState() const {
  return nlohmann::json({{"utility", utility_},
                         {"last_round", last_round_},
                         {"times", times_},
                         {"per_round", per_round_},
                         {"percentile", percentile_},
                         {"paced_round", paced_round_}})
      .dump();
}

void OortSelector::LoadState(const std::string& state) {
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    std::vector<double> utility = j.at("utility");
    std::vector<int64_t> last_round = j.at("last_round");
    std::vector<int32_t> times = j.at("times");
    if (utility.size() != utility_.size() || last_round.size() != utility_.size() ||
        times.size() != utility_.size()) {
      throw Error("checkpoint: Oort state holds " + std::to_string(utility.size()) +
                  " clients, the run has " + std::to_string(utility_.size()));
    }
    utility_ = std::move(utility);
    last_round_ = std::move(last_round);
    times_ = std::move(times);
    per_round_ = j.at("per_round").get<std::vector<double>>();
    percentile_ = j.at("percentile");
    paced_round_ = j.at("paced_round");
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: Oort state: ") + e.what());
  }
}

}  // namespace fedprof
