#ifndef FEDPROF_CORE_SINGLE_THREADED_OPS_H_
#define FEDPROF_CORE_SINGLE_THREADED_OPS_H_

namespace fedprof {

// FedProf parallelises across clients, so every tensor op must stay on one
// thread. LibTorch's OpenMP runtime reads OMP_NUM_THREADS only when it loads
// (at::set_num_threads(1) per thread still oversubscribes), so a program
// calls this first thing in main(): if the variable is unset it sets it to 1
// and re-executes itself. Returns normally when the variable was already set
// (or re-execution failed, which only costs speed).
void EnsureSingleThreadedOps(char** argv);

}  // namespace fedprof

#endif  // FEDPROF_CORE_SINGLE_THREADED_OPS_H_
