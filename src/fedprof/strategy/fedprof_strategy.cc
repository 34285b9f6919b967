#include "fedprof/strategy/fedprof_strategy.h"

#include <nlohmann/json.hpp>
#include <set>

#include "fedprof/core/error.h"

namespace fedprof {

FedProfStrategy::FedProfStrategy(const FedProfOptions& options,
                                 std::unique_ptr<Aggregator> aggregator, int num_clients,
                                 ReferenceProfiler reference_profile)
    : Strategy("fedprof", nullptr, std::move(aggregator)),
      options_(options),
      reference_profile_(std::move(reference_profile)),
      client_profiles_(num_clients) {}

std::vector<double> FedProfStrategy::ComputeScores() const {
  std::vector<double> scores(client_profiles_.size(), 0.0);
  for (size_t k = 0; k < client_profiles_.size(); ++k) {
    const auto& p = client_profiles_[k];
    if (!p) continue;
    const auto ref = references_.find(p->version);
    if (ref == references_.end()) continue;
    scores[k] = Score(Divergence(*p, ref->second), options_.alpha);
  }
  return scores;
}

std::vector<int> FedProfStrategy::ConfigureFit(const SelectionContext& context, Rng& rng) {
  scores_ = ComputeScores();
  return SampleByWeight(scores_, context.num_to_select, options_.with_replacement, rng);
}

void FedProfStrategy::OnGlobalModel(const FlatParams& global, int64_t version) {
  references_[version] = reference_profile_(global, version);
  // Keep only the reference profiles some stored client profile still needs,
  // and the newest.
  std::set<int64_t> used = {version};
  for (const auto& p : client_profiles_) {
    if (p) used.insert(p->version);
  }
  for (auto it = references_.begin(); it != references_.end();) {
    it = used.count(it->first) ? std::next(it) : references_.erase(it);
  }
}

std::string FedProfStrategy::CheckResult(const FitResult& result) const {
  if (!result.profile) return "no profile sent";
  const auto ref = references_.find(result.profile->version);
  if (ref == references_.end()) {
    return "profile of model version " + std::to_string(result.profile->version) +
           ", which the server did not send";
  }
  const std::string why = CheckProfile(*result.profile, ref->second);
  return why.empty() ? "" : "malformed profile: " + why;
}

void FedProfStrategy::ObserveResults(const std::vector<const FitResult*>& results) {
  for (const FitResult* r : results) {
    if (r->profile) client_profiles_.at(r->client_id) = *r->profile;
  }
}

std::string FedProfStrategy::SaveState() const {
  nlohmann::json j;
  j["aggregator"] = Strategy::SaveState();
  j["clients"] = nlohmann::json::array();
  for (const auto& p : client_profiles_) {
    j["clients"].push_back(p ? nlohmann::json::parse(ProfileToJson(*p)) : nlohmann::json());
  }
  j["references"] = nlohmann::json::array();
  for (const auto& [version, p] : references_) {
    j["references"].push_back(nlohmann::json::parse(ProfileToJson(p)));
  }
  return j.dump();
}

void FedProfStrategy::LoadState(const std::string& state) {
  const nlohmann::json j = nlohmann::json::parse(state);
  Strategy::LoadState(j.at("aggregator"));
  const auto& clients = j.at("clients");
  if (clients.size() != client_profiles_.size()) {
    throw Error("checkpoint: FedProf state holds " + std::to_string(clients.size()) +
                " client profiles, the run has " + std::to_string(client_profiles_.size()));
  }
  for (size_t k = 0; k < clients.size(); ++k) {
    client_profiles_[k].reset();
    if (!clients[k].is_null()) client_profiles_[k] = ProfileFromJson(clients[k].dump(), "checkpoint");
  }
  references_.clear();
  for (const auto& r : j.at("references")) {
    Profile p = ProfileFromJson(r.dump(), "checkpoint");
    references_[p.version] = std::move(p);
  }
}

}  // namespace fedprof
