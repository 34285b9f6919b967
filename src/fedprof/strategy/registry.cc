#include "fedprof/strategy/registry.h"

#include "fedprof/config/option_registry.h"

namespace fedprof {
namespace {

OptionRegistry<SelectorFactory>& Selectors() {
  static auto* registry = new OptionRegistry<SelectorFactory>("strategy.selector");  // used until exit
  return *registry;
}

OptionRegistry<AggregatorFactory>& Aggregators() {
  static auto* registry = new OptionRegistry<AggregatorFactory>("strategy.aggregator");
  return *registry;
}

}  // namespace

void RegisterSelector(const std::string& name, SelectorFactory factory) {
  Selectors().Register(name, std::move(factory));
}
void RegisterAggregator(const std::string& name, AggregatorFactory factory) {
  Aggregators().Register(name, std::move(factory));
}
void UnregisterSelector(const std::string& name) { Selectors().Unregister(name); }
void UnregisterAggregator(const std::string& name) { Aggregators().Unregister(name); }
SelectorFactory RegisteredSelector(const std::string& name) { return Selectors().Find(name); }
AggregatorFactory RegisteredAggregator(const std::string& name) { return Aggregators().Find(name); }

}  // namespace fedprof
