#ifndef FEDPROF_SELECTION_FEDPROF_SELECTOR_H_
#define FEDPROF_SELECTION_FEDPROF_SELECTOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/profiling/profile.h"
#include "fedprof/selection/selector.h"

namespace fedprof {

struct FedProfOptions {
  double alpha = 10;              // α of Eq. 13; 0 = uniform sampling
  bool with_replacement = false;  // the papers' random.choices
};

// FedProf's selection (Algorithm 2): clients are sampled with probability
// proportional to λ_k = exp(−α · div(RP_k, RP_V)), where RP_k is the last
// profile client k sent and RP_V the reference profile of the SAME model
// version (profiles are version-aligned). A client profiles its data with
// the model version the server sent it, whose reference profile the server
// computed right after producing that version; so the divergence is
// computed when the profile arrives and only it is kept: 8 bytes per
// client, and the reference of the current version alone. Unselected
// clients keep their divergence.
class FedProfSelector : public Selector {
 public:
  // `reference_profile` computes RP_V on the reference set D_V for a global
  // model and its version.
  using ReferenceProfiler = std::function<Profile(const FlatParams& global, int64_t version)>;

  FedProfSelector(const FedProfOptions& options, int num_clients,
                  ReferenceProfiler reference_profile);

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override;
  Reports WantedReports() const override { return {/*profile=*/true, /*loss=*/false}; }
  bool HasReport(int id) const override;
  void OnGlobalModel(const FlatParams& global, int64_t version) override;
  std::string CheckResult(const FitResult& result) const override;
  void Observe(const FitResult& result) override;
  std::vector<double> LastScores() const override { return scores_; }
  bool KeepsState() const override { return true; }
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

  // λ_k for every client; 0 for a client with no valid profile yet (it is
  // never sampled by score).
  std::vector<double> ComputeScores() const;

 private:
  FedProfOptions options_;
  ReferenceProfiler reference_profile_;
  std::optional<Profile> reference_;  // RP_V of the current model version
  std::vector<double> divergences_;   // div(RP_k, RP_V(v_k)); NaN until client k reports
  std::vector<double> scores_;
};

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_FEDPROF_SELECTOR_H_
