// Client algorithms written in Python (fedprof.ClientAlgorithm), as the
// engine's client half (LocalAlgorithm) and server half (ServerAlgorithm).
// The client half's two hooks run on the thread that trains the client,
// each taking the GIL for its call only; the steps between them stay in
// C++. The server half's hooks run on the round loop's thread, the round's
// results in client order: nothing depends on the order they came in.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "fedprof/algorithms/registry.h"
#include "python/hooks.h"

namespace fedprof::python {
namespace {

using SharedObject = std::shared_ptr<py::object>;  // released with the GIL held (see parts.cc)

// What a hook may return beside the model: at most this many values per
// model value (a state or a message larger than that is a bug, not a plan).
constexpr size_t kMaxValuesPerParam = 4;

py::array_t<float> Copy(const FlatParams& values) {
  return py::array_t<float>(static_cast<py::ssize_t>(values.size()), values.data());
}

py::object CopyOrNone(const FlatParams* values) {
  return values == nullptr ? py::object(py::none()) : py::object(Copy(*values));
}

// `out` of a hook as float32 values: None is empty; a wrong size, or a
// value that is not finite, throws naming `what` (the hook's output).
// `exact` > 0: the size it must have; else at most `limit` values.
FlatParams ValuesFrom(const py::handle& out, const std::string& what, size_t exact, size_t limit) {
  if (out.is_none()) return {};
  const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(out);
  if (!a) throw RunError(what + " is not an array of numbers");
  const auto n = static_cast<size_t>(a.size());
  if (exact > 0 && n != exact) {
    throw RunError(what + " has " + std::to_string(n) + " values; the model has " + std::to_string(exact));
  }
  if (exact == 0 && n > limit) {
    throw RunError(what + " has " + std::to_string(n) + " values, more than " + std::to_string(limit) + " (" +
                std::to_string(kMaxValuesPerParam) + " a model value)");
  }
  FlatParams values(a.data(), a.data() + n);
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) throw RunError(what + ": value " + std::to_string(i) + " is not finite");
  }
  return values;
}

// One client's local training: begin() before the first step (its step
// offset d, applied after every optimiser step as θ ← θ − η d, the form of
// SCAFFOLD's correction), end() after the last.
class PythonLocal final : public LocalAlgorithm {
 public:
  PythonLocal(SharedObject part, std::string name, PendingException* pending, const FitInstructions& ins,
              int client_id, Model& model, const FlatParams& kept)
      : part_(std::move(part)),
        pending_(pending),
        where_("strategy.algorithm = " + name + ": client " + std::to_string(client_id) + " in round " +
               std::to_string(ins.round) + ": "),
        name_(name),
        round_(ins.round),
        client_id_(client_id),
        lr_(ins.train.lr),
        start_(Flatten(model)),
        broadcast_(ins.algorithm_values),
        kept_(kept) {
    FlatParams offset;
    {
      py::gil_scoped_acquire gil;
      try {
        const py::object out = part_->attr("_begin")(round_, client_id_, Copy(start_), CopyOrNone(broadcast_.get()),
                                                     CopyOrNone(kept_.empty() ? nullptr : &kept_), lr_);
        offset = ValuesFrom(out, where_ + "begin()'s step offset", start_.size(), 0);
      } catch (py::error_already_set& err) {
        pending_->Raise(err, name_ + ".begin()");
      }
    }
    if (!offset.empty()) offset_ = ParameterTensors(model, offset);
  }

  void AfterStep(Model& model) override {
    if (offset_.empty()) return;
    torch::NoGradGuard no_grad;
    const auto params = model.parameters();
    for (size_t k = 0; k < params.size(); ++k) params[k].sub_(offset_[k], lr_);
  }

  FlatParams End(Model& model, int64_t steps, FitResult* result) override {
    const FlatParams trained = Flatten(model);
    const size_t limit = kMaxValuesPerParam * trained.size();
    py::gil_scoped_acquire gil;
    try {
      const py::object out =
          part_->attr("_end")(round_, client_id_, Copy(start_), CopyOrNone(broadcast_.get()),
                              CopyOrNone(kept_.empty() ? nullptr : &kept_), lr_, Copy(trained), steps);
      const auto pair = out.cast<py::tuple>();  // (send, keep), checked by _end
      result->algorithm_values = ValuesFrom(pair[0], where_ + "end()'s values to send", 0, limit);
      return ValuesFrom(pair[1], where_ + "end()'s state to keep", 0, limit);
    } catch (py::error_already_set& err) {
      pending_->Raise(err, name_ + ".end()");
    }
  }

 private:
  SharedObject part_;
  PendingException* pending_;
  std::string where_, name_;
  int64_t round_;
  int client_id_;
  double lr_;
  FlatParams start_;
  std::shared_ptr<const FlatParams> broadcast_;
  FlatParams kept_;
  std::vector<torch::Tensor> offset_;  // d per parameter; empty: none
};

// The server half: broadcast(round) before each round, finish() after the
// aggregator with the round's results; its state is the part's own
// save_state() beside the round it has reached.
class PythonServer final : public ServerAlgorithm {
 public:
  PythonServer(SharedObject part, std::string name, PendingException* pending)
      : part_(std::move(part)), name_(std::move(name)), pending_(pending) {
    broadcast_ = CallBroadcast();
  }

  std::shared_ptr<const FlatParams> Broadcast() const override { return broadcast_; }

  std::string Check(const FitResult& r, size_t num_params) const override {
    if (r.algorithm_values.size() > kMaxValuesPerParam * num_params) {
      return "values for strategy.algorithm = " + name_ + " of " + std::to_string(r.algorithm_values.size()) +
             ", more than " + std::to_string(kMaxValuesPerParam) + " a model value";
    }
    for (size_t i = 0; i < r.algorithm_values.size(); ++i) {
      if (!std::isfinite(r.algorithm_values[i])) {
        return "values for strategy.algorithm = " + name_ + ": value " + std::to_string(i) + " is not finite";
      }
    }
    return "";
  }

  void Observe(const FitResult& r, const FlatParams&) override {
    results_.push_back({r.client_id, r.num_samples, r.algorithm_values});
  }

  void Finish(const FlatParams& global, int num_clients, FlatParams* next) override {
    std::sort(results_.begin(), results_.end(), [](const Seen& a, const Seen& b) { return a.client_id < b.client_id; });
    {
      py::gil_scoped_acquire gil;
      py::list results;
      for (const Seen& s : results_) {
        results.append(py::make_tuple(s.client_id, s.num_samples, Copy(s.values)));
      }
      try {
        const py::object out = part_->attr("_finish")(round_, Copy(global), Copy(*next), results, num_clients);
        FlatParams replaced = ValuesFrom(out, "strategy.algorithm = " + name_ + ": round " + std::to_string(round_) +
                                                  ": finish()'s model",
                                         global.size(), 0);
        if (!replaced.empty()) *next = std::move(replaced);
      } catch (py::error_already_set& err) {
        pending_->Raise(err, name_ + ".finish()");
      }
    }
    results_.clear();
    ++round_;
    broadcast_ = CallBroadcast();
  }

  std::string SaveState() const override {
    nlohmann::json j = {{"round", round_}};
    SavePythonState(*part_, name_, pending_, &j);
    return j.dump();
  }

  void LoadState(const std::string& state) override {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(state);
      round_ = j.at("round").get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("checkpoint: ") + name_ + "'s state: " + e.what());
    }
    LoadPythonState(*part_, name_, pending_, j);
    broadcast_ = CallBroadcast();
  }

 private:
  struct Seen {
    int client_id;
    int64_t num_samples;
    FlatParams values;
  };

  // What the part sends every client of round_ (None: nothing).
  std::shared_ptr<const FlatParams> CallBroadcast() const {
    py::gil_scoped_acquire gil;
    try {
      const py::object out = part_->attr("_broadcast")(round_);
      if (out.is_none()) return nullptr;
      // Its size is the part's own business; within bounds of a model's.
      return std::make_shared<const FlatParams>(
          ValuesFrom(out, "strategy.algorithm = " + name_ + ": round " + std::to_string(round_) +
                              ": broadcast()'s values", 0, std::numeric_limits<size_t>::max()));
    } catch (py::error_already_set& err) {
      pending_->Raise(err, name_ + ".broadcast()");
    }
  }

  SharedObject part_;
  std::string name_;
  PendingException* pending_;
  int64_t round_ = 1;
  std::shared_ptr<const FlatParams> broadcast_;
  std::vector<Seen> results_;
};

}  // namespace

void RegisterPythonAlgorithm(py::object algorithm, PendingException* pending) {
  const std::string name = py::str(algorithm.attr("name"));
  auto part = std::make_shared<py::object>(std::move(algorithm));
  ClientAlgorithmFactory factory;
  factory.server = [part, name, pending](const RunOptions&) -> std::unique_ptr<ServerAlgorithm> {
    StartRun(*part, name, pending);
    return std::make_unique<PythonServer>(part, name, pending);
  };
  factory.local = [part, name, pending](const FitInstructions& ins, int client_id, Model& model,
                                        const FlatParams& kept) -> std::unique_ptr<LocalAlgorithm> {
    return std::make_unique<PythonLocal>(part, name, pending, ins, client_id, model, kept);
  };
  RegisterClientAlgorithm(name, std::move(factory));
}

}  // namespace fedprof::python
