#include <algorithm>

#include "fedprof/core/error.h"
#include "fedprof/selection/selector.h"

namespace fedprof {
namespace {

class UniformSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    const int n = static_cast<int>(context.clients->size());
    const int k = std::min(context.num_to_select, n);
    // Partial Fisher-Yates: the first k entries are a uniform k-subset.
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = i;
    for (int i = 0; i < k; ++i) {
      const int j = i + static_cast<int>(UniformIndex(rng, static_cast<uint64_t>(n - i)));
      std::swap(ids[i], ids[j]);
    }
    ids.resize(k);
    std::sort(ids.begin(), ids.end());
    return IdsAt(context, ids);
  }
};

class PoissonSelector : public Selector {
 public:
  explicit PoissonSelector(double rate) : rate_(rate) {}
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    return IdsAt(context, PoissonSample(std::vector<double>(context.clients->size(), rate_), rng));
  }

 private:
  double rate_;
};

}  // namespace

std::vector<int> Selector::SelectEvaluators(const SelectionContext& context, Rng& rng) const {
  const std::vector<double> equal(context.clients->size(), 1.0);
  return IdsAt(context, SampleByWeight(equal, context.num_to_select, /*with_replacement=*/false, rng));
}

std::vector<int> IdsAt(const SelectionContext& context, const std::vector<int>& indices) {
  std::vector<int> ids;
  ids.reserve(indices.size());
  for (int i : indices) ids.push_back((*context.clients)[i].id);
  return ids;
}

std::unique_ptr<Selector> MakeUniformSelector() { return std::make_unique<UniformSelector>(); }

std::unique_ptr<Selector> MakePoissonSelector(double rate) {
  if (!(rate >= 0 && rate <= 1))
    throw Error("Poisson sampling: rate " + std::to_string(rate) + " outside [0, 1]");
  return std::make_unique<PoissonSelector>(rate);
}

}  // namespace fedprof

namespace fedprof {
namespace {

class FirstComeSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& /*rng*/) override {
    std::vector<double> t;
    for (const ClientInfo& c : *context.clients) t.push_back(std::max(0.0, c.expected_time_s));
    std::vector<int> ids(t.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    const int k = std::min<int>(context.num_to_select, static_cast<int>(ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
      return t[a] < t[b] || (t[a] == t[b] && a < b);
    });
    ids.resize(k);
    std::sort(ids.begin(), ids.end());
    return IdsAt(context, ids);
  }
};

}  // namespace

std::unique_ptr<Selector> MakeFirstComeSelector() { return std::make_unique<FirstComeSelector>(); }

}  // namespace fedprof
