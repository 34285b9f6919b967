#ifndef FEDPROF_SELECTION_AFL_SELECTOR_H_
#define FEDPROF_SELECTION_AFL_SELECTOR_H_

#include <string>
#include <vector>

#include "fedprof/selection/selector.h"

namespace fedprof {

// Active Federated Learning (Goetz et al. 2019): every client is valued by
// the loss of the model it last received on its data, v_k = sqrt(|D_k|) ·
// mean loss (the paper's loss-based valuation), and clients are picked by
// SelectAfl. Values come from an initial report of every client and are
// refreshed whenever a client is selected; the others keep theirs. A client
// that has not reported yet is valued 0.
class AflSelector : public Selector {
 public:
  AflSelector(const AflOptions& options, int num_clients);

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override;
  Reports WantedReports() const override { return {/*profile=*/false, /*loss=*/true}; }
  bool HasReport(int id) const override { return reported_.at(id) != 0; }
  std::string CheckResult(const FitResult& result) const override;
  void Observe(const FitResult& result) override;
  std::vector<double> LastScores() const override { return values_; }
  bool KeepsState() const override { return true; }
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

 private:
  AflOptions options_;
  std::vector<double> values_;  // 0 until the client reports
  std::vector<char> reported_;
};

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_AFL_SELECTOR_H_
