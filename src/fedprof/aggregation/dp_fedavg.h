#ifndef FEDPROF_AGGREGATION_DP_FEDAVG_H_
#define FEDPROF_AGGREGATION_DP_FEDAVG_H_

// User-level differential privacy for the model updates (docs/privacy.md,
// "User-level DP"): DP-FedAvg (McMahan, Ramage, Talwar and Zhang, ICLR
// 2018) with fixed or adaptive clipping (Andrew, Thakkar, McMahan and
// Ramaswamy, NeurIPS 2021). Each client clips its update w_k − θ to the
// round's clip norm C (ClipUpdate); the server re-checks the norm, adds the
// clipped updates with weight 1 (never the claimed sample counts), adds
// N(0, z_Δ² C²) to each coordinate of the sum once, and divides by the
// expected number of clients qN (the fixed-denominator estimator). The
// noised mean update then goes to the wrapped aggregator (average or
// FedAdam) as if it were the round's one result.

#include <cstdint>
#include <memory>
#include <string>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/core/params.h"

namespace fedprof {

// ||w − start||₂, summed in index order in double: the same bits wherever
// it is computed (client, server, any thread).
double UpdateNorm(const FlatParams& start, const FlatParams& w);

// Clips the update w − start to L2 norm `clip` (> 0), keeping its
// direction: afterwards UpdateNorm(start, *w) <= clip holds exactly, float
// rounding included. Returns whether the update was within `clip` before
// (Andrew et al.'s indicator b_k; then *w is unchanged).
bool ClipUpdate(const FlatParams& start, double clip, FlatParams* w);

struct DpFedAvgOptions {
  double noise_multiplier = 1.0;  // z: noise sd over the clip norm (of the whole mechanism)
  double clip_norm = 1.0;         // C, or adaptive clipping's C at round 1
  bool adaptive = false;
  double target_quantile = 0.5;  // γ: the share of updates the adapted C should not clip
  double clip_lr = 0.2;          // η_C
  double count_noise = 0;        // σ_b, the noise sd of the unclipped count; 0 = qN / 20
  int64_t num_clients = 0;       // N
  int64_t expected_clients = 0;  // K = qN expected a round: the estimator's denominator
  // q: the most probability with which a client is sampled in a round (K/N
  // for uniform sampling, FedProf's cap under it); 0 = K/N.
  double sample_rate = 0;
  double delta = 0;           // δ of the ledger; 0 = 1 / N
  double target_epsilon = 0;  // > 0: no round that would take ε beyond it
  uint64_t seed = 0;          // the server's noise comes from (seed, round)
  // The noise from OpenSSL's generator instead (dp.noise = secret): no one
  // who knows the seed can remove it, and no run repeats it.
  bool secret_noise = false;
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
  // Rounds aggregated so far (the ledger's steps), and ε after them.
  int64_t rounds() const { return rounds_; }
  double Epsilon() const { return DpEpsilon(options_, rounds_); }
  // The last aggregated round's share of accepted updates that were within
  // its clip norm (un-noised: the server's own record; 0 with none).
  double LastUnclippedShare() const { return last_unclipped_; }
  // Whether one more round keeps ε within options().target_epsilon.
  bool MayRunAnotherRound() const;

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
  FlatParams mean_;  // θ + Δ̃, reused
  ModelSum noised_;  // mean_ as the inner aggregator's one result
};

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_DP_FEDAVG_H_
