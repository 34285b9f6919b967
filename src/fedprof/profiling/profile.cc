#include "fedprof/profiling/profile.h"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

double GaussianKl(double mean_k, double var_k, double mean_v, double var_v) {
  const double d = mean_k - mean_v;
  const double kl =
      0.5 * std::log(var_v / var_k) + (var_k - var_v) / (2 * var_v) + d * d / (2 * var_v);
  if (!std::isnan(kl)) return kl;
  // Values near the double range overflow in the form above (inf − inf,
  // inf / inf). The same terms, arranged so that none overflows to a
  // negative infinity: the KL is then +inf or finite, never NaN.
  return 0.5 * (std::log(var_v) - std::log(var_k)) + 0.5 * (var_k / var_v - 1) +
         0.5 * std::fabs(d) * (std::fabs(d) / var_v);
}

std::vector<double> UnitKl(const Profile& client, const Profile& reference) {
  std::vector<double> kl(client.units());
  for (size_t i = 0; i < kl.size(); ++i) {
    kl[i] = GaussianKl(client.mean[i], client.var[i], reference.mean[i], reference.var[i]);
  }
  return kl;
}

double Divergence(const Profile& client, const Profile& reference) {
  const std::vector<double> kl = UnitKl(client, reference);
  double sum = 0;
  for (double v : kl) sum += v;
  return kl.empty() ? 0.0 : sum / static_cast<double>(kl.size());
}

double Score(double divergence, double alpha) { return std::exp(-alpha * divergence); }

std::string CheckProfile(const Profile& p, const Profile& reference) {
  if (p.mean.size() != p.var.size()) {
    return "mean has " + std::to_string(p.mean.size()) + " units, var " +
           std::to_string(p.var.size());
  }
  if (p.units() != reference.units()) {
    return "profile has " + std::to_string(p.units()) + " units, the reference " +
           std::to_string(reference.units());
  }
  if (p.units() == 0) return "profile is empty";
  if (p.layer != reference.layer) {
    return "profile is of layer '" + Printable(p.layer) + "', the reference of '" +
           Printable(reference.layer) + "'";
  }
  if (p.version != reference.version) {
    return "profile is of model version " + std::to_string(p.version) + ", the reference of " +
           std::to_string(reference.version);
  }
  for (size_t i = 0; i < p.units(); ++i) {
    if (!std::isfinite(p.mean[i])) return "non-finite mean at unit " + std::to_string(i);
    if (!std::isfinite(p.var[i])) return "non-finite variance at unit " + std::to_string(i);
    if (p.var[i] <= 0) return "variance <= 0 at unit " + std::to_string(i);
  }
  return "";
}

std::string ProfileToJson(const Profile& p) {
  const nlohmann::json j = {{"version", p.version}, {"layer", p.layer}, {"mean", p.mean},
                            {"var", p.var}};
  return j.dump();
}

Profile ProfileFromJson(const std::string& text, const std::string& origin) {
  Profile p;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    // get<int64_t>() would convert a float such as 1e300 with undefined
    // behaviour; the version must be an integer.
    const nlohmann::json& version = j.at("version");
    if (!version.is_number_integer() ||
        (version.is_number_unsigned() &&
         version.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      throw Error(origin + ": not a profile: \"version\" must be an integer model version");
    }
    p.version = version.get<int64_t>();
    p.layer = j.at("layer").get<std::string>();
    p.mean = j.at("mean").get<std::vector<double>>();
    p.var = j.at("var").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(origin + ": not a profile: " + e.what());
  }
  return p;
}

}  // namespace fedprof
