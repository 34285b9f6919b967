#include "fedprof/strategy/strategy.h"

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/strategy/afl_strategy.h"
#include "fedprof/strategy/clustered_strategy.h"
#include "fedprof/strategy/fedprof_strategy.h"

namespace fedprof {

Strategy::Strategy(std::string name, std::unique_ptr<Selector> selector,
                   std::unique_ptr<Aggregator> aggregator)
    : name_(std::move(name)), selector_(std::move(selector)), aggregator_(std::move(aggregator)) {}

std::vector<int> Strategy::ConfigureFit(const SelectionContext& context, Rng& rng) {
  return selector_->Select(context, rng);
}

void Strategy::AggregateFit(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                            FlatParams* next) {
  aggregator_->Aggregate(global, sum, total_samples, next);
}

std::string Strategy::SaveState() const { return aggregator_->SaveState(); }

void Strategy::LoadState(const std::string& state) { aggregator_->LoadState(state); }

AggregationMode ParseAggregationMode(const std::string& name) {
  if (name == "full") return AggregationMode::kFull;
  if (name == "partial") return AggregationMode::kPartial;
  throw Error("strategy.aggregation: '" + name + "' is not one of full|partial");
}

std::unique_ptr<Strategy> MakeStrategy(const Config& config, const StrategyContext& context) {
  const std::string& name = config.GetString("strategy.name");
  const AggregationMode mode = ParseAggregationMode(config.GetString("strategy.aggregation"));
  if (name == "fedavg") {
    // McMahan et al. 2017: uniform selection, data-size weighted averaging.
    return std::make_unique<Strategy>(name, MakeUniformSelector(), MakeWeightedAverage(mode));
  }
  if (name == "fedavg-rp") {
    // Li et al. 2020, "On the convergence of FedAvg on non-IID data", Scheme
    // II: uniform selection, always partial averaging.
    return std::make_unique<Strategy>(name, MakeUniformSelector(),
                                      MakeWeightedAverage(AggregationMode::kPartial));
  }
  if (name == "fedprox") {
    // Li et al. 2020, "Federated Optimization in Heterogeneous Networks":
    // clients sampled by data size, proximal term μ/2 ||w − w_global||².
    auto s = std::make_unique<Strategy>(name, MakeSizeWeightedSelector(), MakeWeightedAverage(mode));
    s->SetProximalMu(config.GetDouble("fedprox.mu"));
    return s;
  }
  if (name == "cfcfm") {
    // Wu et al., SAFA (IEEE TC 2021): the K clients that finish first.
    return std::make_unique<Strategy>(name, MakeFirstComeSelector(), MakeWeightedAverage(mode));
  }
  if (name == "clustered") {
    ClusteredOptions o;
    o.sketch_dim = static_cast<int>(config.GetInt("clustered.sketch_dim"));
    return std::make_unique<ClusteredStrategy>(o, MakeWeightedAverage(mode), context.num_clients);
  }
  if (name == "fedbn") {
    // Li et al. 2021, "FedBN: Federated Learning on Non-IID Features via
    // Local Batch Normalization": uniform selection; clients keep their
    // batch-norm layers. The server still averages them, but only its own
    // evaluation of the global model uses the average.
    auto s = std::make_unique<Strategy>(name, MakeUniformSelector(), MakeWeightedAverage(mode));
    s->SetKeepsLocalBatchNorm(true);
    return s;
  }
  if (name == "fedadam") {
    FedAdamOptions o;
    o.server_lr = config.GetDouble("fedadam.server_lr");
    o.beta1 = config.GetDouble("fedadam.beta1");
    o.beta2 = config.GetDouble("fedadam.beta2");
    o.tau = config.GetDouble("fedadam.tau");
    return std::make_unique<Strategy>(name, MakeUniformSelector(), MakeFedAdam(mode, o));
  }
  if (name == "afl") {
    AflOptions o;
    o.drop_share = config.GetDouble("afl.drop_share");
    o.temperature = config.GetDouble("afl.temperature");
    o.random_share = config.GetDouble("afl.random_share");
    return std::make_unique<AflStrategy>(o, MakeWeightedAverage(mode), context.num_clients);
  }
  if (name == "fedprof") {
    FedProfOptions o;
    o.alpha = config.GetDouble("fedprof.alpha");
    o.with_replacement = config.GetString("fedprof.sampling") == "with_replacement";
    if (config.GetString("fedprof.secure_matching") == "paillier") {
      o.secure_key_bits = static_cast<int>(config.GetInt("fedprof.paillier_bits"));
    }
    return std::make_unique<FedProfStrategy>(o, MakeWeightedAverage(mode), context.num_clients,
                                             context.reference_profile);
  }
  throw Error("strategy.name: unknown strategy '" + name + "'");
}

}  // namespace fedprof
