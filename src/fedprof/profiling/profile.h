#ifndef FEDPROF_PROFILING_PROFILE_H_
#define FEDPROF_PROFILING_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// A representation profile RP(θ, D) (Eq. 8): for each of the q units of one
// layer of model version `version`, the mean and variance of that unit's
// representation over every sample of D. On the wire it is q float32 pairs,
// 8q bytes.
struct Profile {
  int64_t version = 0;
  std::string layer;
  std::vector<double> mean;
  std::vector<double> var;

  size_t units() const { return mean.size(); }
  int64_t wire_bytes() const { return 8 * static_cast<int64_t>(mean.size()); }
};

// Variances below this are raised to it, so the KL of Eq. 10 never divides
// by zero or takes log(0) (a unit that is constant over a data set, e.g. a
// dead channel, would otherwise make every divergence infinite).
constexpr double kVarianceFloor = 1e-8;

// KL(N(mean_k, var_k) || N(mean_v, var_v)) for one unit (Eq. 10):
// ½ log(var_v / var_k) + (var_k − var_v) / (2 var_v) + (mean_k − mean_v)² / (2 var_v).
double GaussianKl(double mean_k, double var_k, double mean_v, double var_v);

// Per-unit KL of a client profile against the reference profile.
std::vector<double> UnitKl(const Profile& client, const Profile& reference);

// div(RP_k, RP_V) = mean over units of the per-unit KL (Eq. 9).
double Divergence(const Profile& client, const Profile& reference);

// λ = exp(−α · div) (Eq. 13).
double Score(double divergence, double alpha);

// Why `profile` cannot be matched with `reference`, or "" if it can: a
// non-finite mean or variance, a variance <= 0, lengths that differ from
// each other or from the reference, another layer, or another version.
std::string CheckProfile(const Profile& profile, const Profile& reference);

// JSON {"version": v, "layer": "...", "mean": [...], "var": [...]}.
std::string ProfileToJson(const Profile& profile);
// Throws fedprof::Error naming `origin` and the malformed field.
Profile ProfileFromJson(const std::string& text, const std::string& origin);

}  // namespace fedprof

#endif  // FEDPROF_PROFILING_PROFILE_H_
