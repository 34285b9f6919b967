#include "fedprof/strategy/afl_strategy.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"

namespace fedprof {

AflStrategy::AflStrategy(const AflOptions& options, std::unique_ptr<Aggregator> aggregator,
                         int num_clients)
    : Strategy("afl", nullptr, std::move(aggregator)), options_(options), values_(num_clients, 0.0) {}

std::vector<int> AflStrategy::ConfigureFit(const SelectionContext& context, Rng& rng) {
  return SelectAfl(values_, context.num_to_select, options_, rng);
}

std::string AflStrategy::CheckResult(const FitResult& result) const {
  if (!std::isfinite(result.pre_train_loss) || result.pre_train_loss < 0) {
    return "reported loss " + std::to_string(result.pre_train_loss) + " is not a finite value >= 0";
  }
  return "";
}

void AflStrategy::ObserveResults(const std::vector<const FitResult*>& results) {
  for (const FitResult* r : results) {
    values_.at(r->client_id) = std::sqrt(static_cast<double>(r->num_samples)) * r->pre_train_loss;
  }
}

std::string AflStrategy::SaveState() const {
  return nlohmann::json({{"aggregator", Strategy::SaveState()}, {"values", values_}}).dump();
}

void AflStrategy::LoadState(const std::string& state) {
  const nlohmann::json j = nlohmann::json::parse(state);
  Strategy::LoadState(j.at("aggregator"));
  std::vector<double> values = j.at("values");
  if (values.size() != values_.size()) {
    throw Error("checkpoint: AFL state holds " + std::to_string(values.size()) +
                " client values, the run has " + std::to_string(values_.size()));
  }
  values_ = std::move(values);
}

}  // namespace fedprof
