#include "fedprof/privacy/rdp.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

double LogAdd(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

}  // namespace

double SampledGaussianRdp(double q, double sigma, int64_t steps, int order) {
  if (!(q >= 0 && q <= 1)) throw Error("--sample-rate: expected a value in [0, 1]");
  if (!(sigma >= 0)) throw Error("--noise-multiplier: expected a value >= 0");
  if (order < 2) throw Error("RDP order: expected an integer >= 2");
  if (q == 0 || steps == 0) return 0;
  if (sigma == 0) return std::numeric_limits<double>::infinity();
  const double a = order;
  double log_a = -INFINITY;
  for (int k = 0; k <= order; ++k) {
    double log_term = std::lgamma(a + 1) - std::lgamma(k + 1.0) - std::lgamma(a - k + 1) +
                      k * std::log(q) + (static_cast<double>(k) * k - k) / (2 * sigma * sigma);
    if (k < order) {
      if (q == 1) continue;  // (1 − q)^{α−k} = 0
      log_term += (a - k) * std::log1p(-q);
    }
    log_a = LogAdd(log_a, log_term);
  }
  return static_cast<double>(steps) * log_a / (a - 1);
}

double PoissonSubsampledRdp(double q, int order, const std::function<double(int)>& rdp) {
  if (!(q >= 0 && q <= 1)) throw Error("sample rate: expected a value in [0, 1]");
  if (order < 2) throw Error("RDP order: expected an integer >= 2");
  if (q == 0) return 0;
  const double whole = rdp(order);
  if (q == 1 || !std::isfinite(whole)) return whole;
  const double a = order;
  const auto log_choose = [&](int l) {
    return std::lgamma(a + 1) - std::lgamma(l + 1.0) - std::lgamma(a - l + 1);
  };
  double log_sum = (a - 1) * std::log1p(-q) + std::log(a * q - q + 1);
  log_sum = LogAdd(log_sum, log_choose(2) + 2 * std::log(q) + (a - 2) * std::log1p(-q) + rdp(2));
  for (int l = 3; l <= order; ++l) {
    log_sum = LogAdd(log_sum, std::log(3.0) + log_choose(l) + (a - l) * std::log1p(-q) + l * std::log(q) +
                                  (l - 1) * rdp(l));
  }
  return std::min(whole, log_sum / (a - 1));
}

EpsilonAtOrder EpsilonFromRdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta) {
  if (!(delta > 0 && delta < 1)) throw Error("--delta: expected a value in (0, 1)");
  // RDP 0 at every order means the outputs do not depend on the data at all
  // (no release, or no record ever sampled): ε = 0 for any δ. The
  // conversion below is not tight there and would give log(1/δ)-sized ε.
  if (std::all_of(rdp.begin(), rdp.end(), [](double r) { return r == 0; })) return {0, 0};
  EpsilonAtOrder best{std::numeric_limits<double>::infinity(), 0};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double eps =
        rdp[i] + std::log1p(-1 / a) - (std::log(delta) + std::log(a)) / (a - 1);
    if (eps < best.epsilon) best = {eps, a};
  }
  best.epsilon = std::max(best.epsilon, 0.0);
  return best;
}

EpsilonAtOrder SampledGaussianEpsilon(double q, double sigma, int64_t steps, double delta) {
  if (steps < 0) throw Error("--steps: expected a value >= 0");
  std::vector<double> orders, rdp;
  for (int a = 2; a <= 256; ++a) {
    orders.push_back(a);
    rdp.push_back(SampledGaussianRdp(q, sigma, steps, a));
  }
  return EpsilonFromRdp(orders, rdp, delta);
}

}  // namespace fedprof
