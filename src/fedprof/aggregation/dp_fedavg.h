#ifndef FEDPROF_AGGREGATION_DP_FEDAVG_H_
#define FEDPROF_AGGREGATION_DP_FEDAVG_H_

// User-level differential privacy for the model updates (docs/privacy.md,
// "User-level DP"): DP-FedAvg (McMahan, Ramage, Talwar and Zhang, ICLR
// 2018) with fixed or adaptive clipping (Andrew, Thakkar, McMahan and
// Ramaswamy, NeurIPS 2021). Each client clips its update w_k − θ to the
// round's clip norm C (privacy/update_clipping.h); the server re-checks the norm, adds the
// clipped updates with weight 1 (never the claimed sample counts), adds
// N(0, z_Δ² C²) to each coordinate of the sum once, and divides by the
// expected number of clients qN (the fixed-denominator estimator). The
// noised mean update then goes to the wrapped aggregator (average or
// FedAdam) as if it were the round's one result.
//
// Distributed (dp.mode = distributed, privacy/distributed_dp.h): the same
// sampling, clipping, weights and denominator, but the noise is the
// clients': each encodes its clipped update with its share of it
// (RoundEncoding), secure aggregation sums the encodings, and this
// aggregator receives the decoded, noised sum and adds nothing. Fixed
// clipping only (adaptive clipping needs each client's indicator).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/core/params.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/privacy/noise_source.h"
#include "fedprof/privacy/update_clipping.h"

namespace fedprof {

struct DpFedAvgOptions {
  double noise_multiplier = 1.0;  // z: noise sd over the clip norm (of the whole mechanism)
  double clip_norm = 1.0;         // C, or adaptive clipping's C at round 1
  bool adaptive = false;
  double target_quantile = 0.5;  // γ: the share of updates the adapted C should not clip
  double clip_lr = 0.2;          // η_C
  double count_noise = 0;        // σ_b, the noise sd of the unclipped count; 0 = max(qN / 20, z)
  int64_t num_clients = 0;       // N
  int64_t expected_clients = 0;  // K = qN expected a round: the estimator's denominator
  // q: the most probability with which a client is sampled in a round (K/N
  // for uniform sampling, FedProf's cap under it); 0 = K/N.
  double sample_rate = 0;
  double delta = 0;           // δ of the ledger; 0 = 1 / N
  double target_epsilon = 0;  // > 0: no round that would take ε beyond it
  // Each round's rotation under distributed DP, and (dp.noise = seeded) the
  // server's noise: (seed, round).
  uint64_t seed = 0;
  // Where the server's noise comes from (dp.noise): the seed, OpenSSL's
  // generator, or the server's key (then round r's noise is the key's for
  // (seed, r): one key, one run).
  NoiseSource noise;
  // Distributed DP: the clients noise their encoded updates, b bits a value,
  // conditional rounding at β.
  bool distributed = false;
  int bits = 32;
  double rounding_beta = 0;
  // The fewest clients whose updates a sum of `selected` clients can hold
  // (secure aggregation unmasks no fewer: FewestInSum), and of them the
  // fewest honest ones (less the colluders it allows: FewestHonestInSum);
  // null: `selected`.
  std::function<int64_t(int64_t selected)> fewest_in_sum, fewest_honest_in_sum;
};

// The noise multiplier of the update when adaptive clipping spends part of
// z on the count: z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2) (Andrew et al., Sec. 3,
// "Privacy guarantee": the count of indicators has sensitivity 1/2 once
// centred, so the two queries together are one Gaussian mechanism with
// multiplier z). Throws fedprof::Error when 2σ_b <= z (the count alone
// would need more than the whole budget).
double UpdateNoiseMultiplier(double z, double count_noise);

// Adaptive clipping's step (Andrew et al., Alg. 1, geometric update):
// C ← C · exp(−η_C (b̄ − γ)), b̄ the noised share of unclipped updates.
double NextClipNorm(double clip, double unclipped_share, double target_quantile, double clip_lr);
// b̄ from the round's n accepted results, `within` of them unclipped, and
// the count's noise: (within − n/2 + noise) / qN + 1/2 (the indicators
// centred to ±1/2 halve the count's sensitivity; Andrew et al., Sec. 3).
double UnclippedShare(int64_t within, int64_t n, double noise, double expected_clients);

// ε at options.delta (1/N when 0) after `rounds` rounds: the RDP of the
// Poisson-subsampled Gaussian mechanism with q (DpSampleRate) and multiplier z,
// composed over the rounds and converted (privacy/rdp.h). Infinite when
// z = 0.
double DpEpsilon(const DpFedAvgOptions& options, int64_t rounds);
// The encoding of round `round`, whose session invites `invited` clients,
// for models of `dim` values under distributed DP (DdgEncodingFor, the
// fewest honest clients of the sum from options.fewest_honest_in_sum): each
// client's noise zC/√h, γ for the sum of all of them in b bits, the round's
// rotation from the run's seed. Every client computes the same for itself.
DdgParams DdgRound(const DpFedAvgOptions& options, double clip, int64_t round, size_t dim, int64_t invited);
DdgSettings DdgSettingsOf(const DpFedAvgOptions& options, double clip);
// That round's release when its sum holds `clients`, of whom all but the
// colluders the session allows are honest (all of them may be in it).
DdgRelease DdgRoundRelease(const DpFedAvgOptions& options, double clip, int64_t round, size_t dim,
                           int64_t invited, int64_t clients);
double DpDelta(const DpFedAvgOptions& options);
double DpSampleRate(const DpFedAvgOptions& options);

// The aggregator: wraps `inner` (built in partial mode), whose input is the
// noised mean model θ + Δ̃. Checkpoints hold the clip norm and the inner
// aggregator's state.
class DpFedAvg : public Aggregator {
 public:
  DpFedAvg(std::unique_ptr<Aggregator> inner, const DpFedAvgOptions& options);

  const DpFedAvgOptions& options() const { return options_; }
  // C of the round being trained (sent to the clients with their task).
  double ClipNorm() const { return clip_; }
  // An accepted result's indicator b_k (FitResult::within_clip).
  void Observe(bool within_clip) { within_ += within_clip ? 1 : 0; }
  // Rounds aggregated so far (the ledger's steps), and ε after them against
  // observers of the models, who do not know the sample.
  int64_t rounds() const { return rounds_; }
  double Epsilon() const;
  // ε against the server (and, under distributed DP, the clients colluding
  // with it, the most secure aggregation allows) of a client that took part
  // in `participations` of the rounds so far, charged at the costliest of
  // them and without amplification (the server knows who is in each sum):
  // infinite under central DP, whose server sees the clipped updates.
  double EpsilonAgainstServer(int64_t participations) const;
  // Distributed DP: round `round`'s encoding for a session of `invited`
  // clients (DdgRound), for the model size the server announced
  // (SetModelSize). The round loop says how many it invites before the
  // tasks are made (Invite); the ledger charges the round by it.
  void Invite(int64_t invited) { invited_ = invited; }
  DdgParams RoundEncoding(int64_t round) const { return RoundEncoding(round, invited_); }
  DdgParams RoundEncoding(int64_t round, int64_t invited) const {
    return DdgRound(options_, clip_, round, dim_, invited);
  }
  void SetModelSize(size_t dim) { dim_ = dim; }
  // The last aggregated round's share of accepted updates that were within
  // its clip norm (un-noised: the server's own record; 0 with none).
  double LastUnclippedShare() const { return last_unclipped_; }
  // ε after one more round (under distributed DP, one whose sum holds K
  // clients), and whether it stays within options().target_epsilon.
  double NextEpsilon() const;
  bool MayRunAnotherRound() const;
  // Distributed DP: ε after one more round whose session invites `invited`
  // and whose sum holds `clients`. The server asks it for the fewest its
  // selected clients' sum can hold before any of them trains
  // (MayReleaseSumOf): a round's sum costs more the fewer it holds, so a
  // check at K alone could let dropouts pass the target.
  double EpsilonWithNextSum(int64_t invited, int64_t clients) const;
  int64_t FewestInSum(int64_t selected) const;
  bool MayReleaseSumOf(int64_t selected) const;

  void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next) override;
  void OnGlobalModel(int64_t version) override;
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

 private:
  std::unique_ptr<Aggregator> inner_;
  DpFedAvgOptions options_;
  double update_noise_;  // z_Δ
  double clip_;
  int64_t rounds_ = 0;
  int64_t within_ = 0;  // Σ b_k of the round's accepted results
  double last_unclipped_ = 0;
  size_t dim_ = 0;
  int64_t invited_ = 0;  // the round being trained's session
  // Distributed DP: the clients each round invited and the clients in its
  // sum (the ledger charges each round by its own), in round order.
  std::vector<int64_t> round_invited_, round_clients_;
  // The releases of the rounds so far, each worked out once, and each one's
  // RDP curve against the server.
  const std::vector<DdgRelease>& Releases() const;
  mutable std::vector<DdgRelease> releases_;
  mutable std::vector<std::vector<double>> server_curves_;
  FlatParams mean_;  // θ + Δ̃, reused
  ModelSum noised_;  // mean_ as the inner aggregator's one result
};

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_DP_FEDAVG_H_
