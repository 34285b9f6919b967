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

// OpenBLAS (LibTorch's BLAS on Debian) keeps one thread count for the whole
// process, read from the environment when it loads, and a matrix product
// split over its threads can round differently: a process that cannot set
// OMP_NUM_THREADS before loading it (Python) calls this around a run. Sets
// the count and returns the previous one; -1 and nothing set when no
// OpenBLAS is loaded.
int SetBlasThreads(int threads);

}  // namespace fedprof

#endif  // FEDPROF_CORE_SINGLE_THREADED_OPS_H_
