#ifndef FEDPROF_STRATEGY_REGISTRY_H_
#define FEDPROF_STRATEGY_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>

#include "fedprof/algorithms/registry.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

// Selectors and aggregators from outside the engine: a C++ program that
// links the installed library, or the Python module's fedprof.Selector and
// fedprof.Aggregator (client algorithms: algorithms/registry.h, included
// here). A registered name is a value of strategy.selector or
// strategy.aggregator like the built-in ones (validated, listed in
// messages, part of the config's fingerprint) and composes with any part of
// the other kind. Registrations are process-wide and thread-safe; a run
// makes its parts when it starts, so unregistering affects later runs only.
using SelectorFactory =
    std::function<std::unique_ptr<Selector>(const RunOptions& options, const StrategyContext& context)>;
using AggregatorFactory =
    std::function<std::unique_ptr<Aggregator>(AggregationMode mode, const RunOptions& options)>;

// Throws fedprof::Error when `name` is taken (built in or registered) or is
// not a name: 1 to 64 characters of [a-z0-9_.-], starting with a letter
// (fedprof compare takes "selector+aggregator:mode").
void RegisterSelector(const std::string& name, SelectorFactory factory);
void RegisterAggregator(const std::string& name, AggregatorFactory factory);
// No-ops for names not registered.
void UnregisterSelector(const std::string& name);
void UnregisterAggregator(const std::string& name);

// The factory registered under `name`, or an empty function.
SelectorFactory RegisteredSelector(const std::string& name);
AggregatorFactory RegisteredAggregator(const std::string& name);

}  // namespace fedprof

#endif  // FEDPROF_STRATEGY_REGISTRY_H_
