#include "fedprof/aggregation/dp_fedavg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/privacy/rdp.h"

namespace fedprof {
namespace {

// A round's noise, standard normals (Box-Muller) from the server's source:
// the run's generator keyed by (seed, round), OpenSSL's, or the server's key
// for (seed, round).
class RoundNoise {
 public:
  RoundNoise(const DpFedAvgOptions& o, int64_t round)
      : bits_(NoiseBits(o.noise, "central", std::to_string(o.seed) + " " + std::to_string(round),
                        MakeRng(o.seed, Stream::kDpNoise, {static_cast<uint64_t>(round)}))) {}

  double Next() {
    const uint64_t a = bits_->Next();
    const uint64_t b = bits_->Next();
    return StandardNormalFrom(a, b);
  }

 private:
  std::unique_ptr<RandomBits> bits_;
};

}  // namespace

double UpdateNoiseMultiplier(double z, double count_noise) {
  if (z == 0) return 0;
  if (!(2 * count_noise > z)) {
    throw Error(
        "dp.count_noise: adaptive clipping's count needs 2 x dp.count_noise > "
        "dp.noise_multiplier, here 2 x " +
        std::to_string(count_noise) + " <= " + std::to_string(z));
  }
  return 1 / std::sqrt(1 / (z * z) - 1 / (4 * count_noise * count_noise));
}

double NextClipNorm(double clip, double unclipped_share, double target_quantile, double clip_lr) {
  return clip * std::exp(-clip_lr * (unclipped_share - target_quantile));
}

double UnclippedShare(int64_t within, int64_t n, double noise, double expected_clients) {
  return (static_cast<double>(within) - 0.5 * static_cast<double>(n) + noise) / expected_clients + 0.5;
}

double DpDelta(const DpFedAvgOptions& o) {
  return o.delta > 0 ? o.delta : 1.0 / static_cast<double>(o.num_clients);
}

double DpSampleRate(const DpFedAvgOptions& o) {
  return o.sample_rate > 0 ? o.sample_rate
                           : static_cast<double>(o.expected_clients) / static_cast<double>(o.num_clients);
}

double DpEpsilon(const DpFedAvgOptions& o, int64_t rounds) {
  return SampledGaussianEpsilon(DpSampleRate(o), o.noise_multiplier, rounds, DpDelta(o)).epsilon;
}

DdgSettings DdgSettingsOf(const DpFedAvgOptions& o, double clip) {
  DdgSettings s;
  s.noise_multiplier = o.noise_multiplier;
  s.clip_norm = clip;
  s.bits = o.bits;
  s.rounding_beta = o.rounding_beta;
  return s;
}

DdgParams DdgRound(const DpFedAvgOptions& o, double clip, int64_t round, size_t dim, int64_t invited) {
  const int64_t honest = o.fewest_honest_in_sum ? o.fewest_honest_in_sum(invited) : invited;
  return DdgEncodingFor(DdgSettingsOf(o, clip), dim, invited, honest, DdgRotationSeed(o.seed, round));
}

DdgRelease DdgRoundRelease(const DpFedAvgOptions& o, double clip, int64_t round, size_t dim, int64_t invited,
                           int64_t clients) {
  const int64_t fewest = o.fewest_in_sum ? o.fewest_in_sum(invited) : invited;
  const int64_t honest = o.fewest_honest_in_sum ? o.fewest_honest_in_sum(invited) : invited;
  DdgRelease r;
  r.encoding = DdgRound(o, clip, round, dim, invited);
  r.clients = clients;
  r.honest = std::max<int64_t>(0, clients - (fewest - honest));
  return r;
}

DpFedAvg::DpFedAvg(std::unique_ptr<Aggregator> inner, const DpFedAvgOptions& options)
    : inner_(std::move(inner)), options_(options), clip_(options.clip_norm) {
  if (options_.num_clients < 1 || options_.expected_clients < 1 ||
      options_.expected_clients > options_.num_clients) {
    throw Error("dp: " + std::to_string(options_.expected_clients) + " expected clients of " +
                std::to_string(options_.num_clients));
  }
  if (!(options_.clip_norm > 0)) throw Error("dp.clip_norm: expected a value > 0");
  if (options_.distributed && options_.adaptive) {
    throw Error(
        "dp.clipping = adaptive: under dp.mode = distributed the server never sees whether "
        "a client's update needed clipping; use dp.clipping = fixed");
  }
  // The paper's σ_b = K/20, but never below z: at small K the paper's would
  // leave the update nothing; at σ_b = z the update's z_Δ is 2z/√3.
  if (options_.adaptive && options_.count_noise == 0) {
    options_.count_noise =
        std::max(static_cast<double>(options_.expected_clients) / 20, options_.noise_multiplier);
  }
  update_noise_ = options_.adaptive ? UpdateNoiseMultiplier(options_.noise_multiplier, options_.count_noise)
                                    : options_.noise_multiplier;
}

const std::vector<DdgRelease>& DpFedAvg::Releases() const {
  const size_t rounds = std::min(round_clients_.size(), static_cast<size_t>(rounds_));
  if (releases_.size() > rounds) releases_.resize(rounds);  // a checkpoint of fewer rounds was loaded
  while (releases_.size() < rounds) {
    const size_t i = releases_.size();
    releases_.push_back(DdgRoundRelease(options_, clip_, static_cast<int64_t>(i) + 1, dim_, round_invited_[i],
                                        round_clients_[i]));
  }
  return releases_;
}

double DpFedAvg::Epsilon() const {
  if (!options_.distributed) return DpEpsilon(options_, rounds_);
  if (dim_ == 0) return 0;
  return DdgEpsilon(Releases(), DpSampleRate(options_), DpDelta(options_)).epsilon;
}

double DpFedAvg::EpsilonAgainstServer(int64_t participations) const {
  if (participations <= 0) return 0;
  if (!options_.distributed || options_.noise_multiplier == 0) return std::numeric_limits<double>::infinity();
  if (dim_ == 0) return 0;
  // Each order's RDP from the client's costliest rounds.
  const std::vector<DdgRelease>& releases = Releases();
  if (server_curves_.size() > releases.size()) server_curves_.resize(releases.size());
  while (server_curves_.size() < releases.size()) {
    server_curves_.push_back(DdgRdpCurve(releases[server_curves_.size()], /*honest_only=*/true));
  }
  const std::vector<std::vector<double>>& curves = server_curves_;
  const std::vector<double>& orders = DdgOrders();
  std::vector<double> rdp(orders.size(), 0.0);
  const size_t m = std::min(curves.size(), static_cast<size_t>(participations));
  for (size_t i = 0; i < orders.size(); ++i) {
    std::vector<double> at(curves.size());
    for (size_t r = 0; r < curves.size(); ++r) at[r] = curves[r][i];
    std::partial_sort(at.begin(), at.begin() + static_cast<std::ptrdiff_t>(m), at.end(), std::greater<>());
    for (size_t r = 0; r < m; ++r) rdp[i] += at[r];
  }
  return EpsilonFromRdp(orders, rdp, DpDelta(options_)).epsilon;
}

double DpFedAvg::NextEpsilon() const {
  if (!options_.distributed) return DpEpsilon(options_, rounds_ + 1);
  return EpsilonWithNextSum(options_.expected_clients, options_.expected_clients);
}

bool DpFedAvg::MayRunAnotherRound() const {
  return options_.target_epsilon <= 0 || NextEpsilon() <= options_.target_epsilon;
}

double DpFedAvg::EpsilonWithNextSum(int64_t invited, int64_t clients) const {
  std::vector<DdgRelease> next = Releases();  // a copy: one more round
  next.push_back(DdgRoundRelease(options_, clip_, rounds_ + 1, dim_, invited, clients));
  return DdgEpsilon(next, DpSampleRate(options_), DpDelta(options_)).epsilon;
}

int64_t DpFedAvg::FewestInSum(int64_t selected) const {
  return options_.fewest_in_sum ? std::min(selected, options_.fewest_in_sum(selected)) : selected;
}

bool DpFedAvg::MayReleaseSumOf(int64_t selected) const {
  return !options_.distributed || options_.target_epsilon <= 0 ||
         EpsilonWithNextSum(selected, FewestInSum(selected)) <= options_.target_epsilon;
}

void DpFedAvg::Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                         FlatParams* next) {
  const size_t d = global.size();
  const bool any = sum.count() > 0;
  if (any && sum.size() != d) {
    throw Error("dp: a sum of " + std::to_string(sum.size()) + " values for a model of " + std::to_string(d));
  }
  const double k = static_cast<double>(options_.expected_clients);
  // Under distributed DP the sum arrives noised by its clients (secure
  // aggregation decoded it) and its ledger entry is how many it held;
  // centrally the round's noise is drawn here, in coordinate order, then
  // the count's: the same wherever and however the round was trained, for
  // whoever holds the seed (dp.noise = seeded, simulation only) or the
  // server's key (keyed), and for no one under secret.
  RoundNoise noise(options_, rounds_ + 1);
  const bool central = !options_.distributed;
  const double sd = update_noise_ * clip_;
  if (!central) {
    round_invited_.resize(static_cast<size_t>(rounds_));
    round_clients_.resize(static_cast<size_t>(rounds_));
    round_invited_.push_back(invited_);
    round_clients_.push_back(sum.count());
  }
  mean_.resize(d);
  for (size_t i = 0; i < d; ++i) {
    double noised = any ? sum.Centered(i, global[i]) : 0.0;
    if (central) noised += sd * noise.Next();
    mean_[i] = static_cast<float>(global[i] + noised / k);
  }
  last_unclipped_ = any && central ? static_cast<double>(within_) / static_cast<double>(sum.count()) : 0.0;
  if (options_.adaptive) {
    const double share = UnclippedShare(within_, sum.count(), options_.count_noise * noise.Next(), k);
    clip_ = NextClipNorm(clip_, share, options_.target_quantile, options_.clip_lr);
  }
  noised_.Reset(d);
  noised_.Add(mean_, 1);
  inner_->Aggregate(global, noised_, total_samples, next);
}

void DpFedAvg::OnGlobalModel(int64_t version) {
  rounds_ = version;  // every round adds its noise, an empty one too
  within_ = 0;
  inner_->OnGlobalModel(version);
}

std::string DpFedAvg::SaveState() const {
  nlohmann::json j = {{"clip_norm", clip_}, {"inner", inner_->SaveState()}};
  if (options_.distributed) {
    j["round_clients"] = round_clients_;
    j["round_invited"] = round_invited_;
  }
  return j.dump();
}

void DpFedAvg::LoadState(const std::string& state) {
  if (state.empty()) return;
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    const double clip = j.at("clip_norm").get<double>();
    if (!(clip > 0 && std::isfinite(clip))) throw Error("DP state: clip norm " + std::to_string(clip));
    clip_ = clip;
    if (options_.distributed) {
      std::vector<int64_t> clients = j.at("round_clients").get<std::vector<int64_t>>();
      std::vector<int64_t> invited = j.at("round_invited").get<std::vector<int64_t>>();
      if (invited.size() != clients.size()) throw Error("DP state: the invited of some rounds are missing");
      for (size_t i = 0; i < clients.size(); ++i) {
        if (clients[i] < 0 || invited[i] < clients[i]) {
          throw Error("DP state: a round of " + std::to_string(clients[i]) + " clients of " +
                      std::to_string(invited[i]) + " invited");
        }
      }
      round_clients_ = std::move(clients);
      round_invited_ = std::move(invited);
      releases_.clear();
      server_curves_.clear();
    }
    inner_->LoadState(j.at("inner").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("DP state: ") + e.what());
  }
}

}  // namespace fedprof
