#include "fedprof/strategy/registry.h"

#include <map>
#include <mutex>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

template <class Factory>
struct Registry {
  const char* option;  // the option whose values the names become
  std::mutex mutex;
  std::map<std::string, Factory> factories;
};

Registry<SelectorFactory>& Selectors() {
  static auto* registry = new Registry<SelectorFactory>{"strategy.selector", {}, {}};  // used until exit
  return *registry;
}

Registry<AggregatorFactory>& Aggregators() {
  static auto* registry = new Registry<AggregatorFactory>{"strategy.aggregator", {}, {}};
  return *registry;
}

bool IsName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

template <class Factory>
void Register(Registry<Factory>& registry, const std::string& name, Factory factory) {
  const std::string what = std::string(registry.option) + ": cannot register '" + name + "'";
  if (!IsName(name)) {
    throw Error(what + ": a name is 1 to 64 characters of a-z, 0-9, _ . - starting with a letter");
  }
  if (!factory) throw Error(what + ": no factory");
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const OptionSpec* option = FindOption(registry.option);
  for (const std::string& taken : Split(Choices(*option), '|')) {
    if (taken == name) throw Error(what + ": the name is taken");
  }
  registry.factories[name] = std::move(factory);
  AddChoice(registry.option, name);
}

template <class Factory>
void Unregister(Registry<Factory>& registry, const std::string& name) {
  const std::lock_guard<std::mutex> lock(registry.mutex);
  if (registry.factories.erase(name) > 0) RemoveChoice(registry.option, name);
}

template <class Factory>
Factory Find(Registry<Factory>& registry, const std::string& name) {
  const std::lock_guard<std::mutex> lock(registry.mutex);
  const auto it = registry.factories.find(name);
  return it == registry.factories.end() ? Factory() : it->second;
}

}  // namespace

void RegisterSelector(const std::string& name, SelectorFactory factory) {
  Register(Selectors(), name, std::move(factory));
}
void RegisterAggregator(const std::string& name, AggregatorFactory factory) {
  Register(Aggregators(), name, std::move(factory));
}
void UnregisterSelector(const std::string& name) { Unregister(Selectors(), name); }
void UnregisterAggregator(const std::string& name) { Unregister(Aggregators(), name); }
SelectorFactory RegisteredSelector(const std::string& name) { return Find(Selectors(), name); }
AggregatorFactory RegisteredAggregator(const std::string& name) { return Find(Aggregators(), name); }

}  // namespace fedprof
