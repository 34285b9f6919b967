#ifndef FEDPROF_CONFIG_OPTION_REGISTRY_H_
#define FEDPROF_CONFIG_OPTION_REGISTRY_H_

// Names registered from outside the engine as values of one option
// (strategy.selector, strategy.aggregator, strategy.algorithm), each with
// its factory: registering adds the name to the option's choices, so that
// configs validate it and messages list it. Thread-safe; one per option,
// used until exit (strategy/registry.cc, algorithms/registry.cc).

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

template <class Factory>
class OptionRegistry {
 public:
  explicit OptionRegistry(const char* option) : option_(option) {}

  // Throws fedprof::Error when `name` is taken (built in or registered) or
  // is not a name: 1 to 64 characters of [a-z0-9_.-], starting with a
  // letter (fedprof compare takes "selector+aggregator:mode").
  void Register(const std::string& name, Factory factory) {
    const std::string what = std::string(option_) + ": cannot register '" + name + "'";
    if (!IsName(name)) {
      throw Error(what + ": a name is 1 to 64 characters of a-z, 0-9, _ . - starting with a letter");
    }
    if (!factory) throw Error(what + ": no factory");
    const std::lock_guard<std::mutex> lock(mutex_);
    const OptionSpec* option = FindOption(option_);
    for (const std::string& taken : Split(Choices(*option), '|')) {
      if (taken == name) throw Error(what + ": the name is taken");
    }
    factories_[name] = std::move(factory);
    AddChoice(option_, name);
  }

  // A no-op for a name not registered.
  void Unregister(const std::string& name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (factories_.erase(name) > 0) RemoveChoice(option_, name);
  }

  // The factory registered under `name`, or an empty one.
  Factory Find(const std::string& name) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = factories_.find(name);
    return it == factories_.end() ? Factory() : it->second;
  }

 private:
  static bool IsName(const std::string& name) {
    if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
    for (char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
      if (!ok) return false;
    }
    return true;
  }

  const char* option_;
  std::mutex mutex_;
  std::map<std::string, Factory> factories_;
};

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_OPTION_REGISTRY_H_
