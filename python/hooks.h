// What the module's parts share: how a run that calls into Python ends when
// Python raises, and the strategy parts and data sets a run takes from
// Python (parts.cc, data.cc).
#ifndef FEDPROF_PYTHON_HOOKS_H_
#define FEDPROF_PYTHON_HOOKS_H_

#include <ATen/Parallel.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/single_threaded_ops.h"

namespace fedprof::python {

namespace py = pybind11;

// A run stopped by Ctrl-C: at the end of a round, or while a hook ran.
class Interrupted : public RunError {
 public:
  using RunError::RunError;
};

// Tensor ops and BLAS on one thread each while it lives, as the CLI runs
// them (it sets OMP_NUM_THREADS=1): a product split over threads may round
// differently, and the numbers would depend on the machine. Restores the
// caller's settings.
class OneThreadCompute {
 public:
  OneThreadCompute() : torch_threads_(at::get_num_threads()), blas_threads_(SetBlasThreads(1)) {
    at::set_num_threads(1);
  }
  ~OneThreadCompute() {
    at::set_num_threads(torch_threads_);
    if (blas_threads_ > 0) SetBlasThreads(blas_threads_);
  }
  OneThreadCompute(const OneThreadCompute&) = delete;
  OneThreadCompute& operator=(const OneThreadCompute&) = delete;

 private:
  int torch_threads_, blas_threads_;
};

// The Python exception that ended a run, kept until the run has unwound
// (the engine's threads and files are closed) and then raised to the caller
// with its traceback. One per run; the GIL must be held.
class PendingException {
 public:
  // Inside a catch of `e`, which a hook `what` raised: keeps it and throws
  // to end the run (Interrupted for a KeyboardInterrupt).
  [[noreturn]] void Raise(py::error_already_set& e, const std::string& what);
  std::unique_ptr<py::error_already_set> Take() { return std::move(pending_); }

 private:
  std::unique_ptr<py::error_already_set> pending_;
};

// A run is starting with `part` (each run makes its parts afresh): its
// start_run().
void StartRun(const py::object& part, const std::string& name, PendingException* pending);

// A part's own state in a checkpoint's JSON `j`: its save_state() as
// j["python"] (absent when it returned None), and back to its
// load_state() (nothing when absent). `name` names the part in messages.
void SavePythonState(const py::object& part, const std::string& name, PendingException* pending,
                     nlohmann::json* j);
void LoadPythonState(const py::object& part, const std::string& name, PendingException* pending,
                     const nlohmann::json& j);

// Selectors, aggregators and client algorithms written in Python
// (fedprof.Selector, fedprof.Aggregator, fedprof.ClientAlgorithm),
// registered under their names (strategy/registry.h) for as long as this
// lives, so that the runs' options can name them.
class PythonParts {
 public:
  // `parts`: an object with lists `selectors`, `aggregators` and
  // `algorithms` (the package's _Parts), or None. Throws ValueError when a
  // name is taken.
  PythonParts(const py::object& parts, PendingException* pending);
  ~PythonParts();
  PythonParts(const PythonParts&) = delete;
  PythonParts& operator=(const PythonParts&) = delete;

 private:
  void Unregister();
  std::vector<std::string> selectors_, aggregators_, algorithms_;  // the names registered
};

// Registers `algorithm` (a fedprof.ClientAlgorithm) under its name
// (python/algorithms.cc).
void RegisterPythonAlgorithm(py::object algorithm, PendingException* pending);

// On a rank > 0 of fedprof.launch: rank 0's Python parts by name (each
// selector with the reports it asks for), so that its config validates and
// the clients' costs count what they report; their hooks run on rank 0.
class RankZeroParts {
 public:
  RankZeroParts(const std::vector<std::pair<std::string, std::vector<std::string>>>& selectors,
                const std::vector<std::string>& aggregators);
  ~RankZeroParts();
  RankZeroParts(const RankZeroParts&) = delete;
  RankZeroParts& operator=(const RankZeroParts&) = delete;

 private:
  std::vector<std::string> selectors_, aggregators_;
};

void BindParts(py::module_& m);
void BindData(py::module_& m);
void BindAnalyses(py::module_& m);

}  // namespace fedprof::python

#endif  // FEDPROF_PYTHON_HOOKS_H_
