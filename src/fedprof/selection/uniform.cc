#include <algorithm>
#include <unordered_map>

#include "fedprof/core/error.h"
#include "fedprof/selection/selector.h"

namespace fedprof {
namespace {

class UniformSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    const int n = context.size();
    std::vector<int> indices = UniformIndices(n, std::min(context.num_to_select, n), rng);
    std::sort(indices.begin(), indices.end());
    return IdsAt(context, indices);
  }
  bool DrawsByRank() const override { return true; }
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

std::vector<int> UniformIndices(int n, int k, Rng& rng) {
  std::unordered_map<int, int> moved;  // position -> the index there, where not its own
  const auto at = [&](int i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  std::vector<int> out(static_cast<size_t>(std::max(0, k)));
  for (int i = 0; i < k; ++i) {
    const int j = i + static_cast<int>(UniformIndex(rng, static_cast<uint64_t>(n - i)));
    const int at_i = at(i);
    out[i] = at(j);
    moved[j] = at_i;  // position i is never read again
  }
  return out;
}

std::vector<int> IdsAt(const SelectionContext& context, const std::vector<int>& indices) {
  std::vector<int> ids;
  ids.reserve(indices.size());
  for (int i : indices) ids.push_back(context.clients ? (*context.clients)[i].id : context.ranked->At(i).id);
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
