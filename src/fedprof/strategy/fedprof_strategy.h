#ifndef FEDPROF_STRATEGY_FEDPROF_STRATEGY_H_
#define FEDPROF_STRATEGY_FEDPROF_STRATEGY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/profiling/profile.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

struct FedProfOptions {
  double alpha = 10;              // α of Eq. 13; 0 = uniform sampling
  bool with_replacement = false;  // the papers' random.choices
};

// FedProf (Algorithm 2): clients are sampled with probability proportional
// to λ_k = exp(−α · div(RP_k, RP_V)), where RP_k is the last profile client k
// sent and RP_V the reference profile of the SAME model version (profiles
// are version-aligned). Unselected clients keep their stored profile.
// Aggregation is whichever Aggregator it is given (full or partial).
class FedProfStrategy : public Strategy {
 public:
  // `reference_profile` computes RP_V on the reference set D_V for a global
  // model and its version.
  using ReferenceProfiler = std::function<Profile(const FlatParams& global, int64_t version)>;

  FedProfStrategy(const FedProfOptions& options, std::unique_ptr<Aggregator> aggregator,
                  int num_clients, ReferenceProfiler reference_profile);

  std::vector<int> ConfigureFit(const SelectionContext& context, Rng& rng) override;
  Reports WantedReports() const override { return {/*profile=*/true, /*loss=*/false}; }
  void OnGlobalModel(const FlatParams& global, int64_t version) override;
  std::string CheckResult(const FitResult& result) const override;
  void ObserveResults(const std::vector<const FitResult*>& results) override;
  std::vector<double> LastScores() const override { return scores_; }
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

  // λ_k for every client against the stored reference profiles; 0 for a
  // client with no valid profile yet (it is never sampled by score).
  std::vector<double> ComputeScores() const;

 private:
  FedProfOptions options_;
  ReferenceProfiler reference_profile_;
  std::vector<std::optional<Profile>> client_profiles_;
  std::map<int64_t, Profile> references_;  // RP_V by model version
  std::vector<double> scores_;
};

}  // namespace fedprof

#endif  // FEDPROF_STRATEGY_FEDPROF_STRATEGY_H_
