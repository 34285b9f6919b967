#include "fedprof/algorithms/registry.h"

#include "fedprof/config/option_registry.h"

namespace fedprof {
namespace {

OptionRegistry<ClientAlgorithmFactory>& Algorithms() {
  static auto* registry = new OptionRegistry<ClientAlgorithmFactory>("strategy.algorithm");  // used until exit
  return *registry;
}

}  // namespace

void RegisterClientAlgorithm(const std::string& name, ClientAlgorithmFactory factory) {
  Algorithms().Register(name, std::move(factory));
}
void UnregisterClientAlgorithm(const std::string& name) { Algorithms().Unregister(name); }
ClientAlgorithmFactory RegisteredClientAlgorithm(const std::string& name) { return Algorithms().Find(name); }

bool IsRegisteredAlgorithm(const std::string& name) { return static_cast<bool>(Algorithms().Find(name)); }

}  // namespace fedprof
