// The engine's side of `import fedprof` (python/fedprof/__init__.py): the
// option table, and simulated runs that compute with the GIL released, hand
// each completed round to a Python callback and stop at a round's end on
// Ctrl-C, leaving a run directory that resumes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/distributed/rank_environment.h"
#include "fedprof/report/metrics.h"
#include "fedprof/run/comparison.h"
#include "fedprof/run/deployment.h"
#include "fedprof/run/simulation.h"
#include "python/hooks.h"

namespace fedprof::python {
namespace {

// overwrite=True replaces a run already in `out`; without it the run is refused.
ExistingRun Existing(bool overwrite) { return overwrite ? ExistingRun::kReplace : ExistingRun::kRefuse; }

std::string InterruptedAfter(int64_t round) {
  return "interrupted after round " + std::to_string(round) + "; fedprof.resume(out) continues the run";
}

py::dict RoundDict(const std::string& run, int64_t rounds, const RoundMetrics& m) {
  py::dict d;
  d["run"] = run;
  d["round"] = m.round;
  d["lr"] = m.lr;
  d["selected"] = m.selected;
  d["returned"] = m.returned;
  d["refused"] = m.refused;
  d["timed_out"] = m.timed_out;
  d["staleness"] = m.staleness;
  d["train_loss"] = m.train_loss;
  d["accuracy"] = m.evaluated ? py::object(py::float_(m.accuracy)) : py::object(py::none());
  d["loss"] = m.evaluated ? py::object(py::float_(m.loss)) : py::object(py::none());
  d["online"] = m.online;
  if (m.backdoor_evaluated) d["backdoor_success"] = m.backdoor_success;
  d["virtual_time_s"] = m.virtual_time_s;
  d["energy_wh"] = m.energy_wh;
  d["wall_s"] = m.wall_s;
  d["line"] = ProgressLine(m, rounds);
  return d;
}

// Hears of each completed round on the round loop's thread, which is the
// caller's (the rounds' outputs and checkpoint are written by then). Every
// other report is dropped: they come from worker threads, and a Python
// call there would serialise the clients on the GIL.
class PythonObserver final : public RunObserver {
 public:
  PythonObserver(py::object progress, PendingException* pending)
      : progress_(std::move(progress)), pending_(pending) {}
  ~PythonObserver() override {
    py::gil_scoped_acquire gil;
    progress_ = py::object();
  }

  void EndRound(const RoundMetrics& m, const std::vector<int64_t>&, const std::vector<double>&) override {
    py::gil_scoped_acquire gil;
    if (!progress_.is_none()) {
      try {
        progress_(RoundDict(run_, rounds_, m));
      } catch (py::error_already_set& e) {
        // A Ctrl-C while the callback ran surfaces there: it stops the run
        // as one between rounds does.
        if (e.matches(PyExc_KeyboardInterrupt)) throw Interrupted(InterruptedAfter(m.round));
        pending_->Raise(e, "the progress callback (after round " + std::to_string(m.round) + ")");
      }
    }
    if (PyErr_CheckSignals() != 0) {
      if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        throw Interrupted(InterruptedAfter(m.round));
      }
      py::error_already_set e;
      pending_->Raise(e, "a signal handler (after round " + std::to_string(m.round) + ")");
    }
  }

  // The run the next rounds belong to (a comparison runs several).
  void BeginRun(const RunStartInfo& info) override {
    run_ = info.run_id;
    rounds_ = info.rounds;
  }
  void EndRun(const std::string&) override {}
  void AddPhase(const std::string&, double) override {}
  void AddResult(int, bool, bool, const std::string&, double) override {}
  void AddSecureTime(const std::string&, double) override {}
  void SetConnectedSource(std::function<int()>) override {}
  void AddBytes(int64_t, int64_t) override {}
  void AddTransportRefusal(const std::string&, const std::string&) override {}

 private:
  py::object progress_;
  PendingException* pending_;
  std::string run_;  // its output directory
  int64_t rounds_ = 0;  // planned
};

// Runs `run` (which computes) with the GIL released, and turns how it ends
// into Python's terms: the callback's own exception, KeyboardInterrupt, or
// RuntimeError with the engine's one-line message.
template <class F>
void RunReleased(PendingException& pending, F run) {
  std::string interrupted, failed;
  {
    py::gil_scoped_release release;
    const OneThreadCompute one_thread;
    try {
      run();
    } catch (const Interrupted& e) {
      interrupted = e.what();
    } catch (const std::exception& e) {
      failed = e.what();
    }
  }
  if (std::unique_ptr<py::error_already_set> failure = pending.Take()) throw std::move(*failure);
  if (!interrupted.empty()) {
    PyErr_SetString(PyExc_KeyboardInterrupt, interrupted.c_str());
    throw py::error_already_set();
  }
  if (!failed.empty()) throw std::runtime_error(failed);
}

// The config a run starts from: the TOML file `path` (if any), then the
// assignments in order. Any mistake is a ValueError with the engine's
// message (the key, the valid values, the nearest option's name).
Config ConfigFrom(const std::string& path, const std::vector<std::string>& assignments) {
  try {
    return Config::Load(path, assignments, "fedprof.simulate");
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

py::list Options() {
  py::list out;
  const char* types[] = {"int", "float", "bool", "str"};
  for (const OptionSpec& o : AllOptions()) {
    py::dict d;
    d["name"] = o.name;
    d["type"] = types[static_cast<int>(o.type)];
    d["default"] = o.default_value;
    d["valid"] = ValidValues(o);
    d["resumable"] = o.resumable;
    d["description"] = o.description;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace fedprof::python

PYBIND11_MODULE(_fedprof, m) {
  using namespace fedprof::python;  // NOLINT: this module's own helpers
  m.doc() = "The FedProf engine (use the fedprof package, not this module).";
  m.def("options", &Options, "Every option of a run: name, type, default, valid values, description.");
  m.def("rank_environment", &fedprof::LocalRankEnvironment,
        "The torchrun variables of rank `rank` of `nproc` on this machine, as fedprof launch sets them.");
  // Each run takes the Python parts its options name (`parts`: the
  // package's _Parts, or None; registered for the call), and progress, a
  // callable or None.
  m.def(
      "simulate",
      [](const std::string& config_path, const std::vector<std::string>& assignments, const std::string& out,
         py::object progress, const py::object& parts, bool overwrite) {
        PendingException pending;
        const PythonParts registered(parts, &pending);
        const fedprof::Config config = ConfigFrom(config_path, assignments);
        PythonObserver observer(std::move(progress), &pending);
        RunReleased(pending, [&] { fedprof::RunSimulation(config, out, &observer, Existing(overwrite)); });
      },
      py::arg("config_path"), py::arg("assignments"), py::arg("out"), py::arg("progress"),
      py::arg("parts"), py::arg("overwrite"));
  m.def(
      "compare",
      [](const std::string& config_path, const std::vector<std::string>& assignments,
         const std::vector<std::string>& strategies, int seeds, const std::string& out, py::object progress,
         const py::object& parts, bool overwrite) {
        PendingException pending;
        const PythonParts registered(parts, &pending);
        const fedprof::Config config = ConfigFrom(config_path, assignments);
        if (seeds < 1) throw py::value_error("seeds: expected 1 or more, got " + std::to_string(seeds));
        PythonObserver observer(std::move(progress), &pending);
        std::string table;
        RunReleased(pending,
                    [&] {
                      table = fedprof::RunComparison(config, strategies, seeds, out, &observer, Existing(overwrite));
                    });
        return table;
      },
      py::arg("config_path"), py::arg("assignments"), py::arg("strategies"), py::arg("seeds"), py::arg("out"),
      py::arg("progress"), py::arg("parts"), py::arg("overwrite"));
  m.def(
      "resume",
      [](const std::string& out, const std::vector<std::string>& assignments, py::object progress,
         const py::object& parts) {
        PendingException pending;
        const PythonParts registered(parts, &pending);
        PythonObserver observer(std::move(progress), &pending);
        RunReleased(pending, [&] { fedprof::ResumeSimulation(out, assignments, &observer); });
      },
      py::arg("out"), py::arg("assignments"), py::arg("progress"), py::arg("parts"));
  // A rank > 0 of fedprof.launch (its own process): trains its share of
  // the clients until rank 0's run ends.
  m.def(
      "serve",
      [](const std::string& config_path, const std::vector<std::string>& assignments, const std::string& out,
         const std::string& listen, const std::string& tls_dir, bool insecure, py::object progress,
         const py::object& parts, bool overwrite) {
        PendingException pending;
        const PythonParts registered(parts, &pending);
        const fedprof::Config config = ConfigFrom(config_path, assignments);
        fedprof::ServeOptions serve;
        serve.listen = listen;
        serve.tls_dir = tls_dir;
        serve.insecure = insecure;
        PythonObserver observer(std::move(progress), &pending);
        RunReleased(pending, [&] { fedprof::RunServer(config, out, serve, &observer, Existing(overwrite)); });
      },
      py::arg("config_path"), py::arg("assignments"), py::arg("out"), py::arg("listen"), py::arg("tls_dir"),
      py::arg("insecure"), py::arg("progress"), py::arg("parts"), py::arg("overwrite"));
  // The names of rank 0's Python parts are registered so that the config it
  // sends validates here; their hooks run on rank 0 only.
  m.def(
      "worker",
      [](double rendezvous_timeout_s,
         const std::vector<std::pair<std::string, std::vector<std::string>>>& selectors,
         const std::vector<std::string>& aggregators) {
        const RankZeroParts parts(selectors, aggregators);
        PendingException pending;
        RunReleased(pending, [&] { fedprof::RunSimulationWorker(rendezvous_timeout_s); });
      },
      py::arg("rendezvous_timeout_s"), py::arg("selectors"), py::arg("aggregators"));
  BindParts(m);
  BindData(m);
  BindAnalyses(m);
}
