#include "fedprof/privacy/label_leakage.h"

#include <cmath>
#include <map>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {
namespace {

constexpr double kMaxEnumerated = 5e7;

void CheckDistribution(const std::vector<double>& p) {
  double sum = 0;
  for (double v : p) {
    if (!(v >= 0) || !std::isfinite(v)) {
      throw Error("--distribution: every class probability must be a finite value >= 0");
    }
    sum += v;
  }
  if (p.empty() || std::fabs(sum - 1.0) > 1e-6) {
    throw Error("--distribution: class probabilities sum to " + std::to_string(sum) +
                ", expected 1");
  }
}

// Calls visit(counts) for every composition of k into counts.size() parts.
template <typename Visit>
void ForEachBatchType(std::vector<int>& counts, size_t cls, int left, Visit& visit) {
  if (cls + 1 == counts.size()) {
    counts[cls] = left;
    visit(counts);
    return;
  }
  for (int n = left; n >= 0; --n) {
    counts[cls] = n;
    ForEachBatchType(counts, cls + 1, left - n, visit);
  }
}

}  // namespace

double NumBatchTypes(int classes, int labels_per_client) {
  // C(N + K − 1, K) through log-gamma; exact enough to print and to compare.
  const double n = classes, k = labels_per_client;
  return std::round(std::exp(std::lgamma(n + k) - std::lgamma(k + 1) - std::lgamma(n)));
}

double BatchEntropyBits(const std::vector<double>& p, int k) {
  CheckDistribution(p);
  if (k < 1) throw Error("--samples-per-client: expected at least 1");
  const double types = NumBatchTypes(static_cast<int>(p.size()), k);
  if (types > kMaxEnumerated) {
    throw Error("--samples-per-client: " + std::to_string(k) + " labels over " +
                std::to_string(p.size()) + " classes make " + std::to_string(types) +
                " batch types, too many to enumerate (limit 5e7)");
  }
  const double log_k_factorial = std::lgamma(k + 1.0);
  double h = 0;
  std::vector<int> counts(p.size());
  auto visit = [&](const std::vector<int>& n) {
    double log_p = log_k_factorial;
    for (size_t a = 0; a < n.size(); ++a) {
      if (n[a] == 0) continue;
      if (p[a] == 0) return;  // impossible batch type
      log_p += n[a] * std::log(p[a]) - std::lgamma(n[a] + 1.0);
    }
    h -= std::exp(log_p) * log_p / std::log(2.0);
  };
  ForEachBatchType(counts, 0, k, visit);
  return h;
}

double EmpiricalBatchEntropyBits(const std::vector<double>& p, int k, int64_t clients,
                                 uint64_t seed) {
  CheckDistribution(p);
  if (clients < 1) throw Error("--clients: expected at least 1");
  std::vector<double> cumulative(p.size());
  double running = 0;
  for (size_t a = 0; a < p.size(); ++a) cumulative[a] = running += p[a];
  std::map<std::vector<int>, int64_t> type_counts;
  Rng rng = MakeRng(seed, Stream::kPrivacy);
  std::vector<int> counts(p.size());
  for (int64_t u = 0; u < clients; ++u) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int j = 0; j < k; ++j) {
      const double x = Uniform01(rng) * running;
      size_t a = 0;
      while (a + 1 < p.size() && x >= cumulative[a]) ++a;
      ++counts[a];
    }
    ++type_counts[counts];
  }
  double h = 0;
  for (const auto& [type, c] : type_counts) {
    const double q = static_cast<double>(c) / static_cast<double>(clients);
    h -= q * std::log2(q);
  }
  return h;
}

}  // namespace fedprof
