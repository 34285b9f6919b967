#ifndef FEDPROF_CORE_SINGLE_THREADED_OPS_H_
#define FEDPROF_CORE_SINGLE_THREADED_OPS_H_

namespace fedprof {

// FedProf parallelises across clients, so every tensor op must stay on one
// thread. LibTorch's OpenMP runtime and OpenBLAS read OMP_NUM_THREADS only
// in their initialisers, when the program loads (at::set_num_threads(1) per
// thread still oversubscribes), so a program whose environment lacks it
// must set it to 1 and re-execute itself before they run.
//
// FEDPROF_SINGLE_THREADED_OPS, at namespace scope in an executable's main
// file, does it from the executable's .preinit_array: the dynamic loader
// calls it once every library is mapped and relocated, before any library's
// initialiser (LibTorch's operator registrations are most of a start-up),
// so the first, discarded start is its libraries' loading alone (0.17 s of
// a 0.37 s start-up, measured with `fedprof --help`). The variable,
// once set, passes to every process the program starts. Re-execution
// failing only costs speed. A shared object (the Python module) cannot use
// it: Python calls SetBlasThreads around a run instead.
void SingleThreadedOpsAtLoad(int argc, char** argv, char** envp);

// OpenBLAS (LibTorch's BLAS on Debian) keeps one thread count for the whole
// process, read from the environment when it loads, and a matrix product
// split over its threads can round differently: a process that cannot set
// OMP_NUM_THREADS before loading it (Python) calls this around a run. Sets
// the count and returns the previous one; -1 and nothing set when no
// OpenBLAS is loaded.
int SetBlasThreads(int threads);

}  // namespace fedprof

#define FEDPROF_SINGLE_THREADED_OPS                                                                 \
  [[gnu::used, gnu::section(".preinit_array")]] static void (*const fedprof_single_threaded_ops)( \
      int, char**, char**) = &fedprof::SingleThreadedOpsAtLoad

#endif  // FEDPROF_CORE_SINGLE_THREADED_OPS_H_
