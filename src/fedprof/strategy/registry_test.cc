// Selectors and aggregators registered from outside the engine: their names
// become option values, they compose with the built-in parts, and they leave
// when unregistered.
#include "fedprof/strategy/registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"

namespace fedprof {
namespace {

// The K lowest ids, and how often it was asked.
class LowestIds : public Selector {
 public:
  explicit LowestIds(int* calls) : calls_(calls) {}
  std::vector<int> Select(const SelectionContext& context, Rng&) override {
    ++*calls_;
    std::vector<int> ids;
    for (int i = 0; i < context.num_to_select; ++i) ids.push_back((*context.clients)[i].id);
    return ids;
  }

 private:
  int* calls_;
};

// Keeps the global model.
class Still : public Aggregator {
 public:
  void Aggregate(const FlatParams& global, const ModelSum&, int64_t, FlatParams* next) override {
    *next = global;
  }
};

TEST(RegistryTest, ARegisteredNameIsAnOptionValueUntilUnregistered) {
  int calls = 0;
  RegisterSelector("test.lowest", [&calls](const RunOptions&, const StrategyContext&) {
    return std::make_unique<LowestIds>(&calls);
  });
  RegisterAggregator("test.still",
                     [](AggregationMode, const RunOptions&) { return std::make_unique<Still>(); });
  Config config;
  config.Set("strategy.selector", "test.lowest");
  config.Set("strategy.aggregator", "fedadam");  // with a built-in aggregator
  StrategyContext context;
  context.num_clients = 4;
  std::unique_ptr<Strategy> strategy = MakeStrategy(config.options(), context);
  EXPECT_EQ(strategy->name(), "test.lowest+fedadam");
  const std::vector<ClientInfo> clients = {{0, 10, 1}, {1, 10, 1}, {2, 10, 1}, {3, 10, 1}};
  SelectionContext select{1, 2, &clients};
  Rng rng = MakeRng(1, Stream::kSelection);
  EXPECT_EQ(strategy->selector().Select(select, rng), (std::vector<int>{0, 1}));
  EXPECT_EQ(calls, 1);

  config.Set("strategy.selector", "uniform");  // a built-in selector with the registered aggregator
  config.Set("strategy.aggregator", "test.still");
  EXPECT_EQ(MakeStrategy(config.options(), context)->name(), "uniform+test.still");

  UnregisterSelector("test.lowest");
  UnregisterAggregator("test.still");
  EXPECT_THROW(config.Set("strategy.aggregator", "test.still"), Error);
  try {
    config.Set("strategy.selector", "test.lowest");
    FAIL() << "an unregistered name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not one of uniform|size|"), std::string::npos) << e.what();
  }
}

TEST(RegistryTest, TakenAndMalformedNamesAreRefused) {
  auto factory = [](const RunOptions&, const StrategyContext&) -> std::unique_ptr<Selector> {
    return nullptr;
  };
  EXPECT_THROW(RegisterSelector("uniform", factory), Error);  // a built-in's
  EXPECT_THROW(RegisterSelector("Upper", factory), Error);
  EXPECT_THROW(RegisterSelector("has:colon", factory), Error);  // compare reads selector+aggregator:mode
  EXPECT_THROW(RegisterSelector("", factory), Error);
  EXPECT_THROW(RegisterSelector("test.none", nullptr), Error);
  RegisterSelector("test.once", factory);
  EXPECT_THROW(RegisterSelector("test.once", factory), Error);
  UnregisterSelector("test.once");
  UnregisterSelector("test.never");        // a no-op
  RegisterSelector("test.once", factory);  // free again
  UnregisterSelector("test.once");
}

}  // namespace
}  // namespace fedprof
