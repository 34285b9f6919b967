#ifndef FEDPROF_ALGORITHMS_REGISTRY_H_
#define FEDPROF_ALGORITHMS_REGISTRY_H_

// Client algorithms from outside the engine (a C++ program that links the
// installed library, the Python module's fedprof.ClientAlgorithm): a
// registered name is a value of strategy.algorithm like the built-in ones
// (strategy/registry.h has the selectors' and aggregators' beside it). Its
// client half runs in this process's clients only (simulate, compare,
// resume): launch and a deployment refuse it.

#include <functional>
#include <memory>
#include <string>

#include "fedprof/algorithms/algorithm.h"

namespace fedprof {

class LocalAlgorithm;  // algorithms/local_algorithm.h
class Model;

struct ClientAlgorithmFactory {
  std::function<std::unique_ptr<ServerAlgorithm>(const RunOptions& options)> server;
  std::function<std::unique_ptr<LocalAlgorithm>(const FitInstructions& ins, int client_id, Model& model,
                                                const FlatParams& kept)>
      local;
  explicit operator bool() const { return server && local; }
};

// Throws fedprof::Error when `name` is taken or not a name (as
// RegisterSelector does); unregistering a name not registered is a no-op.
void RegisterClientAlgorithm(const std::string& name, ClientAlgorithmFactory factory);
void UnregisterClientAlgorithm(const std::string& name);
// The factory registered under `name`, or an empty one.
ClientAlgorithmFactory RegisteredClientAlgorithm(const std::string& name);

}  // namespace fedprof

#endif  // FEDPROF_ALGORITHMS_REGISTRY_H_
