#ifndef FEDPROF_ALGORITHMS_KINDS_H_
#define FEDPROF_ALGORITHMS_KINDS_H_

// The halves each algorithm's file defines, for algorithm.cc's dispatch.

#include <memory>
#include <string>

#include "fedprof/algorithms/algorithm.h"
#include "fedprof/algorithms/local_algorithm.h"

namespace fedprof {

std::unique_ptr<LocalAlgorithm> MakeFedProxLocal(double mu, Model& model);
std::unique_ptr<ServerAlgorithm> MakeScaffoldServer(double server_lr);
std::unique_ptr<LocalAlgorithm> MakeScaffoldLocal(const FitInstructions& ins, Model& model, const FlatParams& kept);
std::unique_ptr<ServerAlgorithm> MakeFedNovaServer();
std::unique_ptr<LocalAlgorithm> MakeFedNovaLocal(const TrainOptions& train);
std::unique_ptr<ServerAlgorithm> MakeFedDynServer(double alpha);
std::unique_ptr<LocalAlgorithm> MakeFedDynLocal(const FitInstructions& ins, Model& model, const FlatParams& kept);
std::unique_ptr<LocalAlgorithm> MakeMoonLocal(const FitInstructions& ins, Model& model, const FlatParams& kept);

// "" when `values` is a vector of `num_params` finite values that an exact
// model sum can take (|v| < kMaxModelSumTerm), else why not, naming `what`.
std::string CheckAlgorithmValues(const FlatParams& values, size_t num_params, const std::string& what);

}  // namespace fedprof

#endif  // FEDPROF_ALGORITHMS_KINDS_H_
