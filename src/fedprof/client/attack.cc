#include "fedprof/client/attack.h"

#include <algorithm>
#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {

AttackKind ParseAttackKind(const std::string& name) {
  if (name == "scale") return AttackKind::kScale;
  if (name == "sign_flip") return AttackKind::kSignFlip;
  if (name == "label_flip") return AttackKind::kLabelFlip;
  if (name == "backdoor") return AttackKind::kBackdoor;
  if (name == "alie") return AttackKind::kAlie;
  if (name == "ipm") return AttackKind::kIpm;
  if (name == "min_max") return AttackKind::kMinMax;
  if (name == "min_sum") return AttackKind::kMinSum;
  if (name == "tailored") return AttackKind::kTailored;
  throw Error("attack.kind: '" + name +
              "' is not one of scale|sign_flip|label_flip|backdoor|alie|ipm|min_max|min_sum|tailored");
}

Perturbation ParsePerturbation(const std::string& name) {
  if (name == "std") return Perturbation::kStd;
  if (name == "unit") return Perturbation::kUnit;
  if (name == "sign") return Perturbation::kSign;
  throw Error("attack.perturbation: '" + name + "' is not one of std|unit|sign");
}

namespace {

// Φ⁻¹(p) for 0 < p < 1, by bisection on Φ(z) = erfc(−z/√2)/2 to double precision.
double InverseNormalCdf(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-15; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

double SquaredDistance(const std::vector<double>& x, const std::vector<double>& y) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (x[i] - y[i]) * (x[i] - y[i]);
  return s;
}

// The largest γ in the paper's halving search (Alg. 1) with fits(μ + γ p).
template <class Fits>
double LargestGamma(const std::vector<double>& mu, const std::vector<double>& p, Fits fits) {
  double gamma = 10, step = 5, best = 0;  // γ_init = 10, halving to τ = 1e-5
  std::vector<double> candidate(mu.size());
  while (step > 1e-5) {
    for (size_t i = 0; i < mu.size(); ++i) candidate[i] = mu[i] + gamma * p[i];
    if (fits(candidate)) {
      best = gamma;
      gamma += step;
    } else {
      gamma -= step;
    }
    step /= 2;
  }
  return best;
}

}  // namespace

std::vector<double> ColludingUpdate(const Attack& attack, const std::vector<std::vector<double>>& honest,
                                    int round_results, int attackers, const Defence& defence) {
  if (honest.empty()) throw Error("attack: the colluding attackers need at least one honest update");
  const size_t m = honest.size(), d = honest[0].size();
  std::vector<double> mu(d, 0.0), sigma(d, 0.0);
  for (const std::vector<double>& u : honest) {
    for (size_t i = 0; i < d; ++i) mu[i] += u[i];
  }
  for (size_t i = 0; i < d; ++i) mu[i] /= static_cast<double>(m);
  for (const std::vector<double>& u : honest) {
    for (size_t i = 0; i < d; ++i) sigma[i] += (u[i] - mu[i]) * (u[i] - mu[i]);
  }
  for (size_t i = 0; i < d; ++i) sigma[i] = std::sqrt(sigma[i] / static_cast<double>(m));
  std::vector<double> out(d);
  switch (attack.kind) {
    case AttackKind::kAlie: {
      double z = attack.z;
      if (z < 0) {
        const int n = round_results;
        const int s = n / 2 + 1 - attackers;
        z = InverseNormalCdf(std::clamp(static_cast<double>(n - s) / n, 1e-12, 1 - 1e-12));
      }
      for (size_t i = 0; i < d; ++i) out[i] = mu[i] - z * sigma[i];
      return out;
    }
    case AttackKind::kIpm:
      for (size_t i = 0; i < d; ++i) out[i] = -attack.scale * mu[i];
      return out;
    case AttackKind::kMinMax:
    case AttackKind::kMinSum: {
      double norm = 0;
      for (double v : sigma) norm += v * v;
      norm = std::sqrt(norm);
      std::vector<double> p(d, 0.0);
      if (norm > 0) {
        for (size_t i = 0; i < d; ++i) p[i] = -sigma[i] / norm;
      }
      double bound = 0;  // max over honest of the max (min-max) or sum (min-sum) of distances
      for (size_t a = 0; a < m; ++a) {
        double worst = 0;
        for (size_t b = 0; b < m; ++b) {
          const double d2 = SquaredDistance(honest[a], honest[b]);
          worst = attack.kind == AttackKind::kMinMax ? std::max(worst, d2) : worst + d2;
        }
        bound = std::max(bound, worst);
      }
      const bool min_max = attack.kind == AttackKind::kMinMax;
      const double gamma = LargestGamma(mu, p, [&](const std::vector<double>& candidate) {
        double worst = 0;
        for (const std::vector<double>& u : honest) {
          const double d2 = SquaredDistance(candidate, u);
          worst = min_max ? std::max(worst, d2) : worst + d2;
        }
        return worst <= bound;
      });
      for (size_t i = 0; i < d; ++i) out[i] = mu[i] + gamma * p[i];
      return out;
    }
    case AttackKind::kTailored: {
      if (!defence) throw Error("attack: tailored attackers need the aggregator's estimate");
      std::vector<double> p(d, 0.0);
      double norm = 0;
      for (size_t i = 0; i < d; ++i) {
        switch (attack.perturbation) {
          case Perturbation::kStd: p[i] = -sigma[i]; break;
          case Perturbation::kUnit: p[i] = -mu[i]; break;
          case Perturbation::kSign: p[i] = mu[i] > 0 ? -1.0 : (mu[i] < 0 ? 1.0 : 0.0); break;
        }
        norm += p[i] * p[i];
      }
      norm = std::sqrt(norm);
      if (norm > 0) {
        for (double& v : p) v /= norm;
      }
      const auto deviation = [&](const std::vector<double>& candidate) {
        const std::optional<std::vector<double>> estimate = defence(candidate);
        return estimate ? SquaredDistance(*estimate, mu) : 0.0;
      };
      double best = deviation(mu);  // γ = 0: the attackers send the honest mean
      const double gamma = LargestGamma(mu, p, [&](const std::vector<double>& candidate) {
        const double moved = deviation(candidate);
        if (!(moved > best)) return false;
        best = moved;
        return true;
      });
      for (size_t i = 0; i < d; ++i) out[i] = mu[i] + gamma * p[i];
      return out;
    }
    default:
      throw Error("attack: " + std::to_string(static_cast<int>(attack.kind)) + " is not a colluding attack");
  }
}

void ApplyAttack(const Attack& attack, const FlatParams& base, FlatParams* params) {
  const AttackKind kind = attack.kind;
  if (kind != AttackKind::kScale && kind != AttackKind::kSignFlip && kind != AttackKind::kBackdoor) return;
  if (params->size() != base.size()) {
    throw Error("attack: a model of " + std::to_string(params->size()) + " values from one of " +
                std::to_string(base.size()));
  }
  const double lambda = attack.kind == AttackKind::kSignFlip ? -attack.scale : attack.scale;
  for (size_t i = 0; i < base.size(); ++i) {
    const double update = static_cast<double>((*params)[i]) - base[i];
    (*params)[i] = static_cast<float>(base[i] + lambda * update);
  }
}

std::vector<char> ChooseAttackers(int num_clients, double share, uint64_t seed) {
  std::vector<char> attackers(static_cast<size_t>(std::max(0, num_clients)), 0);
  const auto count = static_cast<int64_t>(std::llround(share * num_clients));
  if (count <= 0) return attackers;  // no draw: share 0 touches nothing
  Rng rng = MakeRng(seed, Stream::kAttackers);
  const std::vector<int64_t> order = Permutation(rng, num_clients);
  for (int64_t k = 0; k < count && k < num_clients; ++k) attackers[order[k]] = 1;
  return attackers;
}

const Attack& AttackPlan::For(int client) const {
  static const Attack kHonest;
  return client >= 0 && static_cast<size_t>(client) < attackers.size() && attackers[client]
             ? attack
             : kHonest;
}

AttackPlan MakeAttackPlan(const RunOptions::Attack& options, int64_t seed, int num_clients) {
  AttackPlan plan;
  plan.attack.kind = ParseAttackKind(options.kind);
  plan.attack.scale = options.scale;
  plan.attack.z = options.z.value_or(-1.0);
  plan.attack.target = options.target;
  plan.attack.poison_share = options.poison_share;
  plan.attack.perturbation = ParsePerturbation(options.perturbation);
  plan.attackers = ChooseAttackers(num_clients, options.share,
                                   static_cast<uint64_t>(seed));
  return plan;
}

}  // namespace fedprof
