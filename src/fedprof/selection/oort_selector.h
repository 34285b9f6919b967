#ifndef FEDPROF_SELECTION_OORT_SELECTOR_H_
#define FEDPROF_SELECTION_OORT_SELECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/selection/selector.h"

namespace fedprof {

// Oort (Lai et al., "Oort: Efficient Federated Learning via Guided
// Participant Selection", OSDI 2021, Alg. 1). Defaults: the paper's cut-off
// c = 95% and α = 2 (Sec. 4), the rest as the authors' implementation sets
// them (docs/decisions.md).
struct OortOptions {
  double exploration = 0.9;         // ε in round 1: the share of K spent on unexplored clients
  double exploration_decay = 0.95;  // ε ← max(ε · decay, exploration_min) every round
  double exploration_min = 0.2;
  double cut_off = 0.95;            // c: exploit among clients within c of the (1 − ε)K-th utility
  double penalty = 2;               // α of the system penalty (T / t_i)^α for t_i > T
  double duration_percentile = 10;  // T: this percentile of the clients' round times; >= 100: none
  int pacer_window = 20;            // W rounds
  double pacer_step = 5;            // Δ: percentile points T relaxes by
  double clip_quantile = 0.98;      // statistical utilities above this quantile count as it
};

// ε in round `round` (1-based).
double OortExploration(const OortOptions& options, int64_t round);

// Oort's utility of an explored client (Alg. 1 lines 9-13): its statistical
// utility U_i = |B_i| · sqrt(mean of its squared sample losses), clipped and
// scaled into [0, 1] as (min(U_i, clip) − low) / range, plus the staleness
// bonus sqrt(0.1 ln R / L_i) (L_i the last round it took part in), times the
// system penalty (T / t_i)^α when its round time t_i exceeds T.
struct OortScale {
  double clip = 0, low = 0, range = 1;
};
OortScale OortUtilityScale(std::vector<double> utilities, double clip_quantile);
double OortScore(double utility, const OortScale& scale, int64_t round, int64_t last_round, double duration_s,
                 double preferred_s, double penalty);

// The pacer (Alg. 1 lines 3-5): with the statistical utility each past
// round collected (`per_round[r - 1]` for round r), at a round R − 1 that is
// a multiple of W and at least 2W, T relaxes by Δ percentile points when the
// last W rounds collected less than the W before them. Returns the new
// percentile (at most 100).
double OortPacer(const std::vector<double>& per_round, int64_t round, int window, double step,
                 double percentile);

// Beyond any loss a model could have on sensible data; bounds what one client
// can claim (its utility is samples × this).
constexpr double kMaxLossRms = 1e6;

// The selector: clients report nothing beyond their results; each trained
// result brings its statistical utility (FitResult::train_loss_rms ·
// samples); round times come from ClientInfo::expected_time_s (the cost
// model's in simulation, the last measured one in a deployment). Per client
// it keeps 20 bytes (utility, last round, times trained).
class OortSelector : public Selector {
 public:
  OortSelector(const OortOptions& options, int num_clients);

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override;
  // A trained result's loss RMS must be in [0, kMaxLossRms].
  std::string CheckResult(const FitResult& result) const override;
  bool NeedsTrainingLoss() const override { return true; }  // its utility's loss RMS
  void Observe(const FitResult& result) override;
  std::vector<double> LastScores() const override { return scores_; }
  bool KeepsState() const override { return true; }
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

  // The preferred round duration T of the last selection (infinity: none).
  double preferred_duration_s() const { return preferred_s_; }

 private:
  OortOptions options_;
  std::vector<double> utility_;      // by client id, from its last trained result
  std::vector<int64_t> last_round_;  // 0: never trained (unexplored)
  std::vector<int32_t> times_;
  std::vector<double> per_round_;  // statistical utility collected by each round
  double percentile_;
  int64_t round_ = 0;        // the round last selected for
  int64_t paced_round_ = 0;  // the last round the pacer ran in
  double preferred_s_ = 0;
  std::vector<double> scores_;
};

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_OORT_SELECTOR_H_
