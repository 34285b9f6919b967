#include "fedprof/selection/fedprof_selector.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/privacy/secure_matching.h"

namespace fedprof {

FedProfSelector::FedProfSelector(const FedProfOptions& options, int num_clients,
                                 ReferenceProfiler reference_profile, RunObserver* observer)
    : options_(options),
      reference_profile_(std::move(reference_profile)),
      observer_(observer),
      divergences_(num_clients, std::numeric_limits<double>::quiet_NaN()) {
  if (options_.secure_key_bits > 0) {
    key_ = std::make_unique<PaillierSecretKey>(PaillierSecretKey::Generate(options_.secure_key_bits));
    public_key_ = std::make_shared<const std::string>(key_->public_key().Serialize());
  }
}

std::vector<double> FedProfSelector::ComputeScores() const {
  std::vector<double> scores(divergences_.size(), 0.0);
  for (size_t k = 0; k < divergences_.size(); ++k) {
    if (!std::isnan(divergences_[k])) scores[k] = Score(divergences_[k], options_.alpha);
  }
  return scores;
}

bool FedProfSelector::HasReport(int id) const { return !std::isnan(divergences_.at(id)); }

std::vector<int> FedProfSelector::Select(const SelectionContext& context, Rng& rng) {
  scores_ = ComputeScores();
  std::vector<double> weights;
  weights.reserve(context.clients->size());
  for (const ClientInfo& c : *context.clients) weights.push_back(scores_.at(c.id));
  if (options_.poisson_cap > 0) {
    return IdsAt(context,
                 PoissonSample(CappedInclusion(weights, context.num_to_select, options_.poisson_cap), rng));
  }
  return IdsAt(context,
               SampleByWeight(weights, context.num_to_select, options_.with_replacement, rng));
}

const Profile* FedProfSelector::ReferenceOf(int64_t version) const {
  const auto it = references_.find(version);
  return it == references_.end() ? nullptr : &it->second;
}

void FedProfSelector::OnGlobalModel(const FlatParams& global, int64_t version) {
  const Profile& reference = references_[version] = reference_profile_(global, version);
  while (references_.size() > kKeptReferences) references_.erase(references_.begin());
  if (key_) {
    SecureTimer timer(observer_, "paillier");  // --monitor's secure-matching time
    secure_reference_ =
        std::make_shared<const std::string>(EncryptReference(*key_, reference).Serialize());
  }
}

void FedProfSelector::OnEarlierModel(const FlatParams& model, int64_t version) {
  if (references_.count(version) == 0) references_[version] = reference_profile_(model, version);
}

void FedProfSelector::ConfigureReport(int client_id, ReportRequest* report) const {
  (void)client_id;  // every client matches against the same reference
  report->public_key = public_key_;
  report->secure_reference = secure_reference_;
}

std::string FedProfSelector::CheckResult(const FitResult& result) const {
  if (key_) {
    if (result.profile) return "sent its profile in the clear under secure matching";
    if (result.encrypted_divergence.empty()) return "no encrypted divergence sent";
    try {
      SecureTimer timer(observer_, "paillier");
      decrypted_[result.client_id] =
          DecryptDivergence(*key_, result.encrypted_divergence, references_.rbegin()->second.units());
    } catch (const Error& e) {
      return std::string("encrypted divergence refused: ") + e.what();
    }
    return "";
  }
  if (!result.profile) return "no profile sent";
  const Profile* reference = ReferenceOf(result.profile->version);
  if (reference == nullptr) {
    return "profile of model version " + std::to_string(result.profile->version) +
           ", whose reference profile the server does not hold";
  }
  const std::string why = CheckProfile(*result.profile, *reference);
  return why.empty() ? "" : "malformed profile: " + why;
}

void FedProfSelector::Observe(const FitResult& result) {
  if (key_) {
    const auto it = decrypted_.find(result.client_id);
    if (it == decrypted_.end()) return;
    divergences_.at(result.client_id) = it->second;
    decrypted_.erase(it);
    return;
  }
  const Profile* reference = result.profile ? ReferenceOf(result.profile->version) : nullptr;
  if (reference == nullptr) return;
  divergences_.at(result.client_id) = Divergence(*result.profile, *reference);
}

std::string FedProfSelector::SaveState() const {
  nlohmann::json div = nlohmann::json::array();
  for (double d : divergences_) div.push_back(std::isnan(d) ? nlohmann::json() : nlohmann::json(d));
  nlohmann::json j;
  j["divergences"] = std::move(div);
  return j.dump();
}

void FedProfSelector::LoadState(const std::string& state) {
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    const auto& div = j.at("divergences");
    if (div.size() != divergences_.size()) {
      throw Error("checkpoint: FedProf state holds " + std::to_string(div.size()) +
                  " clients, the run has " + std::to_string(divergences_.size()));
    }
    for (size_t k = 0; k < div.size(); ++k) {
      divergences_[k] =
          div[k].is_null() ? std::numeric_limits<double>::quiet_NaN() : div[k].get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: FedProf state: ") + e.what());
  }
}

}  // namespace fedprof
