#include "fedprof/selection/afl_selector.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"

namespace fedprof {

AflSelector::AflSelector(const AflOptions& options, int num_clients)
    : options_(options), values_(num_clients, 0.0), reported_(num_clients, 0) {}

std::vector<int> AflSelector::Select(const SelectionContext& context, Rng& rng) {
  std::vector<double> values;
  values.reserve(context.clients->size());
  for (const ClientInfo& c : *context.clients) values.push_back(values_.at(c.id));
  return IdsAt(context, SelectAfl(values, context.num_to_select, options_, rng));
}

std::string AflSelector::CheckResult(const FitResult& result) const {
  if (!std::isfinite(result.pre_train_loss) || result.pre_train_loss < 0) {
    return "reported loss " + std::to_string(result.pre_train_loss) + " is not a finite value >= 0";
  }
  return "";
}

void AflSelector::Observe(const FitResult& result) {
  values_.at(result.client_id) =
      std::sqrt(static_cast<double>(result.num_samples)) * result.pre_train_loss;
  reported_.at(result.client_id) = 1;
}

std::string AflSelector::SaveState() const {
  return nlohmann::json({{"values", values_}, {"reported", reported_}}).dump();
}

void AflSelector::LoadState(const std::string& state) {
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    std::vector<double> values = j.at("values");
    std::vector<char> reported = j.at("reported");
    if (values.size() != values_.size() || reported.size() != values_.size()) {
      throw Error("checkpoint: AFL state holds " + std::to_string(values.size()) +
                  " client values, the run has " + std::to_string(values_.size()));
    }
    values_ = std::move(values);
    reported_ = std::move(reported);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: AFL state: ") + e.what());
  }
}

}  // namespace fedprof
