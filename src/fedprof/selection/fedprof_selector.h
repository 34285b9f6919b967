#ifndef FEDPROF_SELECTION_FEDPROF_SELECTOR_H_
#define FEDPROF_SELECTION_FEDPROF_SELECTOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/privacy/paillier.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/selection/selector.h"

namespace fedprof {

class RunObserver;

struct FedProfOptions {
  double alpha = 10;              // α of Eq. 13; 0 = uniform sampling
  bool with_replacement = false;  // the papers' random.choices
  // Secure matching (App. C.2): clients return Enc(q·div) under a Paillier
  // key of this many bits held by the selector; 0 = plain profiles.
  int secure_key_bits = 0;
  // > 0: Poisson sampling (user-level DP): client k is drawn independently
  // with probability min(this cap, c · λ_k), K expected (CappedInclusion).
  double poisson_cap = 0;
};

// FedProf's selection (Algorithm 2): clients are sampled with probability
// proportional to λ_k = exp(−α · div(RP_k, RP_V)), where RP_k is the last
// profile client k sent and RP_V the reference profile of the SAME model
// version (profiles are version-aligned). A client profiles its data with
// the model version the server sent it (which the server checks), whose
// reference profile the server computed right after producing that
// version; so the divergence is computed when the profile arrives and only
// it is kept: 8 bytes per client, and the references of the last
// kKeptReferences versions (an asynchronous run's clients train on earlier
// ones). Unselected clients keep their divergence.
//
// With secure matching the selector generates a Paillier key for the run
// (never written anywhere: divergences, not ciphertexts, are what a
// checkpoint keeps), sends the public key and the encrypted reference of
// each version with the instructions, and decrypts each client's Enc(q·div)
// (privacy/secure_matching.h): it never sees a client's profile.
class FedProfSelector : public Selector {
 public:
  // `reference_profile` computes RP_V on the reference set D_V for a global
  // model and its version.
  using ReferenceProfiler = std::function<Profile(const FlatParams& global, int64_t version)>;

  // `observer` (null: none) hears of the time secure matching takes.
  FedProfSelector(const FedProfOptions& options, int num_clients,
                  ReferenceProfiler reference_profile, RunObserver* observer = nullptr);

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override;
  Reports WantedReports() const override { return {/*profile=*/true, /*loss=*/false}; }
  bool HasReport(int id) const override;
  void OnGlobalModel(const FlatParams& global, int64_t version) override;
  void OnEarlierModel(const FlatParams& model, int64_t version) override;
  void ConfigureReport(int client_id, ReportRequest* report) const override;
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
  RunObserver* const observer_;
  static constexpr size_t kKeptReferences = 1024;
  std::map<int64_t, Profile> references_;  // RP_V by model version, the last kKeptReferences
  // RP_V of `version`, or null when none is kept.
  const Profile* ReferenceOf(int64_t version) const;
  std::vector<double> divergences_;   // div(RP_k, RP_V(v_k)); NaN until client k reports
  std::vector<double> scores_;
  // Secure matching: the key, what goes to clients for the current version,
  // and divergences decrypted by CheckResult for Observe to keep.
  std::unique_ptr<PaillierSecretKey> key_;
  std::shared_ptr<const std::string> public_key_;
  std::shared_ptr<const std::string> secure_reference_;
  mutable std::map<int, double> decrypted_;
};

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_FEDPROF_SELECTOR_H_
