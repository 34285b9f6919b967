// Selectors and aggregators written in Python, as the engine's Selector and
// Aggregator (client algorithms: algorithms.cc). The engine calls them on
// the round loop's thread with the GIL released; each hook takes the GIL
// for the Python call only, so clients keep training on the other threads
// meanwhile.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/selection/fedprof_selector.h"
#include "fedprof/strategy/registry.h"
#include "python/hooks.h"

namespace fedprof::python {
namespace {

// The run's random stream, lent to a Python selector for one select call;
// a stored reference refuses to draw afterwards.
struct RngView {
  Rng* rng = nullptr;
  Rng& Get() const {
    if (rng == nullptr) throw std::runtime_error("fedprof.Rng: the stream serves only during select()");
    return *rng;
  }
};

// A Python object shared by the engine's parts, copied and released
// without the GIL; the last reference is dropped with the GIL held
// (PythonParts outlives every run that uses it).
using SharedObject = std::shared_ptr<py::object>;

std::string NameOf(const py::object& part) { return py::str(part.attr("name")); }

// `values` (per client id; NaN: unknown) as JSON, null for NaN.
nlohmann::json ToJson(const std::vector<double>& values) {
  nlohmann::json j = nlohmann::json::array();
  for (double v : values) j.push_back(std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v));
  return j;
}

std::vector<double> FromJson(const nlohmann::json& j, size_t size) {
  std::vector<double> values(size, std::numeric_limits<double>::quiet_NaN());
  if (!j.is_array() || j.size() != size) throw Error("checkpoint: selector state of another population");
  for (size_t i = 0; i < size; ++i) {
    if (!j[i].is_null()) values[i] = j[i].get<double>();
  }
  return values;
}

// A fedprof.Selector subclass. It asks the clients for what the subclass's
// `reports` names and keeps, per client, what the engine knows of it: times
// selected, the last training loss, the loss of the global model on its data
// ("loss" reports) and FedProf's profile score ("profile" reports, scored as
// the fedprof selector scores them).
class PythonSelector final : public Selector {
 public:
  PythonSelector(SharedObject part, std::string name, int num_clients, bool wants_loss,
                 std::unique_ptr<FedProfSelector> profiles, PendingException* pending)
      : part_(std::move(part)),
        name_(std::move(name)),
        wants_loss_(wants_loss),
        profiles_(std::move(profiles)),
        pending_(pending),
        times_selected_(num_clients, 0),
        train_loss_(num_clients, std::numeric_limits<double>::quiet_NaN()),
        loss_(num_clients, std::numeric_limits<double>::quiet_NaN()) {}

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    if (profiles_) scores_ = profiles_->ComputeScores();
    py::gil_scoped_acquire gil;
    const py::object chosen = Call("_select", "select()", context, rng);
    std::vector<int> out = CheckedIds(chosen, context, "select()");
    for (int c : out) ++times_selected_[c];
    return out;
  }

  std::vector<int> SelectEvaluators(const SelectionContext& context, Rng& rng) const override {
    {
      py::gil_scoped_acquire gil;
      const py::object chosen = Call("_configure_evaluate", "configure_evaluate()", context, rng);
      if (!chosen.is_none()) return CheckedIds(chosen, context, "configure_evaluate()");
    }
    return Selector::SelectEvaluators(context, rng);
  }

  Reports WantedReports() const override { return {profiles_ != nullptr, wants_loss_}; }
  bool HasReport(int id) const override {
    if (profiles_ && !profiles_->HasReport(id)) return false;
    return !wants_loss_ || !std::isnan(loss_.at(id));
  }
  void ConfigureReport(int client_id, ReportRequest* report) const override {
    if (profiles_) profiles_->ConfigureReport(client_id, report);
  }
  void OnGlobalModel(const FlatParams& global, int64_t version) override {
    if (profiles_) profiles_->OnGlobalModel(global, version);
  }
  std::string CheckResult(const FitResult& result) const override {
    if (!std::isfinite(result.train_loss) || (wants_loss_ && !std::isfinite(result.pre_train_loss))) {
      return "a loss that is not a finite number";
    }
    return profiles_ ? profiles_->CheckResult(result) : "";
  }
  void Observe(const FitResult& result) override {
    const size_t id = static_cast<size_t>(result.client_id);
    if (!result.params.empty() || result.summed) train_loss_.at(id) = result.train_loss;
    if (wants_loss_) loss_.at(id) = result.pre_train_loss;
    if (profiles_) profiles_->Observe(result);
  }
  std::vector<double> LastScores() const override { return scores_; }

  bool KeepsState() const override { return true; }
  std::string SaveState() const override {
    nlohmann::json j;
    j["times_selected"] = times_selected_;
    j["train_loss"] = ToJson(train_loss_);
    j["loss"] = ToJson(loss_);
    if (profiles_) j["profiles"] = profiles_->SaveState();
    SavePythonState(*part_, name_, pending_, &j);
    return j.dump();
  }
  void LoadState(const std::string& state) override {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(state);
      const auto times = j.at("times_selected").get<std::vector<int64_t>>();
      if (times.size() != times_selected_.size())
        throw Error("checkpoint: selector state of another population");
      times_selected_ = times;
      train_loss_ = FromJson(j.at("train_loss"), times.size());
      loss_ = FromJson(j.at("loss"), times.size());
      if (profiles_) profiles_->LoadState(j.at("profiles").get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("checkpoint: selector state: ") + e.what());
    }
    LoadPythonState(*part_, name_, pending_, j);
  }

 private:
  // Calls the part's `method` (a hook named `hook` in messages) with the
  // round, the clients' arrays (fedprof.Clients), k and the run's stream
  // for this call only. With the GIL held.
  py::object Call(const char* method, const std::string& hook, const SelectionContext& context,
                  Rng& rng) const {
    const std::vector<ClientInfo>& clients = *context.clients;
    const auto n = static_cast<py::ssize_t>(clients.size());
    py::array_t<int64_t> ids(n), samples(n), times(n);
    py::array_t<double> expected(n), train_loss(n), loss(n), score(n);
    auto id = ids.mutable_unchecked<1>();
    auto s = samples.mutable_unchecked<1>();
    auto t = times.mutable_unchecked<1>();
    auto e = expected.mutable_unchecked<1>();
    auto tl = train_loss.mutable_unchecked<1>();
    auto l = loss.mutable_unchecked<1>();
    auto sc = score.mutable_unchecked<1>();
    const double unknown = std::numeric_limits<double>::quiet_NaN();
    for (py::ssize_t i = 0; i < n; ++i) {
      const ClientInfo& c = clients[i];
      id(i) = c.id;
      s(i) = c.num_samples;
      t(i) = times_selected_.at(c.id);
      e(i) = c.expected_time_s < 0 ? unknown : c.expected_time_s;
      tl(i) = train_loss_[c.id];
      l(i) = loss_[c.id];
      sc(i) = profiles_ && !scores_.empty() ? scores_.at(c.id) : unknown;
    }
    auto view = std::make_shared<RngView>();
    view->rng = &rng;
    py::object out;
    try {
      out = part_->attr(method)(context.round, ids, samples, expected, times, train_loss, loss, score,
                                context.num_to_select, view);
    } catch (py::error_already_set& err) {
      view->rng = nullptr;
      pending_->Raise(err, name_ + "." + hook);
    }
    view->rng = nullptr;
    return out;
  }

  // `chosen` (an int64 array from the part) as distinct ids of the round's
  // clients, at most k, increasing; throws naming the hook otherwise.
  std::vector<int> CheckedIds(const py::object& chosen, const SelectionContext& context,
                              const std::string& hook) const {
    const std::vector<ClientInfo>& clients = *context.clients;
    const auto array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(chosen);
    if (!array) throw Error(name_ + "." + hook + ": did not return client ids");
    const std::vector<int64_t> picked(array.data(), array.data() + array.size());
    if (static_cast<int64_t>(picked.size()) > context.num_to_select) {
      throw Error(name_ + "." + hook + ": returned " + std::to_string(picked.size()) + " clients; k is " +
                  std::to_string(context.num_to_select));
    }
    std::vector<int> out;
    out.reserve(picked.size());
    for (int64_t p : picked) {
      const auto it = std::lower_bound(clients.begin(), clients.end(), p,
                                       [](const ClientInfo& c, int64_t v) { return c.id < v; });
      if (it == clients.end() || it->id != p) {
        throw Error(name_ + "." + hook + ": returned " + std::to_string(p) +
                    ", not one of the round's clients");
      }
      out.push_back(it->id);
    }
    std::sort(out.begin(), out.end());
    if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
      throw Error(name_ + "." + hook + ": returned a client twice");
    }
    return out;
  }

  SharedObject part_;
  std::string name_;
  bool wants_loss_;
  std::unique_ptr<FedProfSelector> profiles_;
  PendingException* pending_;
  std::vector<int64_t> times_selected_;
  std::vector<double> train_loss_, loss_;
  std::vector<double> scores_;
};

// A read-only NumPy view of `values`, valid while they are: the aggregator
// refuses a call after which Python still holds one (Unreleased).
py::array_t<float> View(const FlatParams& values) {
  py::array_t<float> a({static_cast<py::ssize_t>(values.size())}, {static_cast<py::ssize_t>(sizeof(float))},
                       values.data(), py::capsule(values.data(), [](void*) {}));
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// A fedprof.Aggregator subclass: it gets every accepted model of a round
// (the server keeps them, as for the robust rules) as zero-copy views.
class PythonAggregator final : public Aggregator {
 public:
  PythonAggregator(SharedObject part, std::string name, PendingException* pending)
      : part_(std::move(part)), name_(std::move(name)), pending_(pending) {}

  void Aggregate(const FlatParams&, const ModelSum&, int64_t, FlatParams*) override {
    throw Error(name_ + ": aggregates each model, not their sum");
  }
  bool NeedsUpdates() const override { return true; }
  void OnGlobalModel(int64_t version) override { round_ = version + 1; }

  void AggregateUpdates(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                        int64_t total_samples, FlatParams* next) override {
    // In client order: the call must not depend on the order results came in.
    std::vector<const ClientUpdate*> ordered;
    for (const ClientUpdate& u : updates) ordered.push_back(&u);
    std::sort(ordered.begin(), ordered.end(),
              [](const ClientUpdate* a, const ClientUpdate* b) { return a->client_id < b->client_id; });
    py::gil_scoped_acquire gil;
    const auto n = static_cast<py::ssize_t>(ordered.size());
    py::array_t<int64_t> ids(n), samples(n);
    py::list params;
    for (py::ssize_t i = 0; i < n; ++i) {
      ids.mutable_at(i) = ordered[i]->client_id;
      samples.mutable_at(i) = ordered[i]->num_samples;
      params.append(View(ordered[i]->params));
    }
    py::array_t<float> global_view = View(global);
    std::vector<float> result;
    try {
      py::array_t<float> out =
          part_->attr("_aggregate")(round_, global_view, ids, samples, params, total_samples);
      if (static_cast<size_t>(out.size()) != global.size()) {
        throw Error(name_ + ".aggregate(): returned " + std::to_string(out.size()) +
                    " values for a model of " + std::to_string(global.size()));
      }
      result.assign(out.data(), out.data() + out.size());
    } catch (py::error_already_set& err) {
      ClearFrames(err);
      pending_->Raise(err, name_ + ".aggregate()");
    }
    Unreleased(global_view, params);
    for (size_t i = 0; i < result.size(); ++i) {
      if (!std::isfinite(result[i])) {
        throw Error(name_ + ".aggregate(): returned a model whose value " + std::to_string(i) +
                    " is not finite");
      }
    }
    *next = std::move(result);
  }

  bool AggregateEvaluations(int64_t round, const std::vector<ClientEvaluation>& evaluations, double* accuracy,
                            double* loss) override {
    py::gil_scoped_acquire gil;
    const auto n = static_cast<py::ssize_t>(evaluations.size());
    py::array_t<int64_t> ids(n), samples(n), correct(n);
    py::array_t<double> losses(n);
    for (py::ssize_t i = 0; i < n; ++i) {
      ids.mutable_at(i) = evaluations[i].client_id;
      samples.mutable_at(i) = evaluations[i].samples;
      correct.mutable_at(i) = evaluations[i].correct;
      losses.mutable_at(i) = evaluations[i].loss;
    }
    py::object out;
    try {
      out = part_->attr("_aggregate_evaluate")(round, ids, samples, correct, losses);
    } catch (py::error_already_set& err) {
      pending_->Raise(err, name_ + ".aggregate_evaluate()");
    }
    if (out.is_none()) return false;
    const auto figures = out.cast<std::pair<double, double>>();  // (accuracy, loss) from _aggregate_evaluate
    if (!std::isfinite(figures.first) || !std::isfinite(figures.second)) {
      throw Error(name_ + ".aggregate_evaluate(): returned an accuracy or loss that is not finite");
    }
    *accuracy = figures.first;
    *loss = figures.second;
    return true;
  }

  std::string SaveState() const override {
    py::gil_scoped_acquire gil;
    try {
      const py::object state = part_->attr("_aggregator_state")();
      return state.is_none() ? "" : state.cast<std::string>();
    } catch (py::error_already_set& err) {
      pending_->Raise(err, name_ + ".save_state()");
    }
  }
  void LoadState(const std::string& state) override {
    if (state.empty()) return;
    py::gil_scoped_acquire gil;
    try {
      part_->attr("_load_aggregator_state")(py::str(state));
    } catch (py::error_already_set& err) {
      pending_->Raise(err, name_ + ".load_state()");
    }
  }

 private:
  // A traceback's frames would keep the views alive past the models they
  // show; their lines stay, their locals go.
  static void ClearFrames(py::error_already_set& err) {
    if (err.trace()) py::module_::import("traceback").attr("clear_frames")(err.trace());
  }

  // Throws when Python kept a view beyond the call (it would outlive the
  // models it shows).
  void Unreleased(const py::array_t<float>& global_view, const py::list& params) const {
    bool kept = global_view.ref_count() > 1 || params.ref_count() > 1;
    for (const py::handle p : params) kept = kept || p.ref_count() > 1;
    if (kept) {
      throw Error(name_ +
                  ".aggregate(): kept a view of a model after returning; copy what you keep "
                  "(numpy.array(result.params))");
    }
  }

  SharedObject part_;
  std::string name_;
  PendingException* pending_;
  int64_t round_ = 1;
};

// A Python part's stand-ins on a rank > 0 of fedprof.launch, which trains
// the clients it is sent and never selects nor aggregates: what the clients
// report (it enters their cost) is all it needs of the selector.
class RankZeroSelector final : public Selector {
 public:
  RankZeroSelector(std::string name, Reports reports) : name_(std::move(name)), reports_(reports) {}
  std::vector<int> Select(const SelectionContext&, Rng&) override {
    throw Error(name_ + ": a Python selector selects on rank 0 only");
  }
  Reports WantedReports() const override { return reports_; }

 private:
  std::string name_;
  Reports reports_;
};

class RankZeroAggregator final : public Aggregator {
 public:
  explicit RankZeroAggregator(std::string name) : name_(std::move(name)) {}
  void Aggregate(const FlatParams&, const ModelSum&, int64_t, FlatParams*) override {
    throw Error(name_ + ": a Python aggregator aggregates on rank 0 only");
  }
  bool NeedsUpdates() const override { return true; }

 private:
  std::string name_;
};

void RegisterPythonSelector(py::object selector, PendingException* pending) {
  const std::string name = NameOf(selector);
  const py::tuple reports = selector.attr("_reports")();
  bool loss = false, profile = false;
  for (const py::handle r : reports) {
    const auto kind = r.cast<std::string>();
    loss = loss || kind == "loss";
    profile = profile || kind == "profile";
  }
  auto part = std::make_shared<py::object>(std::move(selector));
  RegisterSelector(
      name, [part, name, loss, profile, pending](const RunOptions& options, const StrategyContext& context) {
        StartRun(*part, name, pending);
        std::unique_ptr<FedProfSelector> profiles;
        if (profile) {
          FedProfOptions o;
          o.alpha = options.fedprof.alpha;
          if (options.fedprof.secure_matching == "paillier")
            o.secure_key_bits = static_cast<int>(options.fedprof.paillier_bits);
          profiles = std::make_unique<FedProfSelector>(o, context.num_clients, context.reference_profile,
                                                       context.observer);
        }
        return std::make_unique<PythonSelector>(part, name, context.num_clients, loss, std::move(profiles),
                                                pending);
      });
}

void RegisterPythonAggregator(py::object aggregator, PendingException* pending) {
  const std::string name = NameOf(aggregator);
  auto part = std::make_shared<py::object>(std::move(aggregator));
  RegisterAggregator(name, [part, name, pending](AggregationMode, const RunOptions&) {
    StartRun(*part, name, pending);
    return std::make_unique<PythonAggregator>(part, name, pending);
  });
}

}  // namespace

void StartRun(const py::object& part, const std::string& name, PendingException* pending) {
  py::gil_scoped_acquire gil;
  try {
    part.attr("start_run")();
  } catch (py::error_already_set& err) {
    pending->Raise(err, name + ".start_run()");
  }
}

void SavePythonState(const py::object& part, const std::string& name, PendingException* pending,
                     nlohmann::json* j) {
  py::gil_scoped_acquire gil;
  try {
    const py::object state = part.attr("_save_state")();
    if (!state.is_none()) (*j)["python"] = state.cast<std::string>();
  } catch (py::error_already_set& err) {
    pending->Raise(err, name + ".save_state()");
  }
}

void LoadPythonState(const py::object& part, const std::string& name, PendingException* pending,
                     const nlohmann::json& j) {
  if (!j.contains("python")) return;
  std::string state;
  try {
    state = j.at("python").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint: " + name + "'s state: " + e.what());
  }
  py::gil_scoped_acquire gil;
  try {
    part.attr("_load_state")(py::str(state));
  } catch (py::error_already_set& err) {
    pending->Raise(err, name + ".load_state()");
  }
}

void PendingException::Raise(py::error_already_set& e, const std::string& what) {
  if (e.matches(PyExc_KeyboardInterrupt)) throw Interrupted("interrupted in " + what);
  if (!pending_) pending_ = std::make_unique<py::error_already_set>(std::move(e));
  throw RunError(what + " raised an exception");
}

PythonParts::PythonParts(const py::object& parts, PendingException* pending) {
  if (parts.is_none()) return;
  try {
    for (const py::handle s : parts.attr("selectors")) {
      RegisterPythonSelector(py::reinterpret_borrow<py::object>(s), pending);
      selectors_.push_back(NameOf(py::reinterpret_borrow<py::object>(s)));
    }
    for (const py::handle a : parts.attr("aggregators")) {
      RegisterPythonAggregator(py::reinterpret_borrow<py::object>(a), pending);
      aggregators_.push_back(NameOf(py::reinterpret_borrow<py::object>(a)));
    }
    for (const py::handle a : parts.attr("algorithms")) {
      RegisterPythonAlgorithm(py::reinterpret_borrow<py::object>(a), pending);
      algorithms_.push_back(NameOf(py::reinterpret_borrow<py::object>(a)));
    }
  } catch (const Error& e) {
    Unregister();
    throw py::value_error(e.what());
  }
}

PythonParts::~PythonParts() { Unregister(); }

void PythonParts::Unregister() {
  for (const std::string& name : selectors_) UnregisterSelector(name);
  for (const std::string& name : aggregators_) UnregisterAggregator(name);
  for (const std::string& name : algorithms_) UnregisterClientAlgorithm(name);
}

RankZeroParts::RankZeroParts(const std::vector<std::pair<std::string, std::vector<std::string>>>& selectors,
                             const std::vector<std::string>& aggregators) {
  for (const auto& [name, reports] : selectors) {
    const Selector::Reports wanted{std::find(reports.begin(), reports.end(), "profile") != reports.end(),
                                   std::find(reports.begin(), reports.end(), "loss") != reports.end()};
    RegisterSelector(name, [name = name, wanted](const RunOptions&, const StrategyContext&) {
      return std::make_unique<RankZeroSelector>(name, wanted);
    });
    selectors_.push_back(name);
  }
  for (const std::string& name : aggregators) {
    RegisterAggregator(name, [name](AggregationMode, const RunOptions&) {
      return std::make_unique<RankZeroAggregator>(name);
    });
    aggregators_.push_back(name);
  }
}

RankZeroParts::~RankZeroParts() {
  for (const std::string& name : selectors_) UnregisterSelector(name);
  for (const std::string& name : aggregators_) UnregisterAggregator(name);
}

void BindParts(py::module_& m) {
  py::class_<RngView, std::shared_ptr<RngView>>(m, "Rng",
                                                "The run's sampling stream during select(): the same "
                                                "draws whatever the threads, from the run's seed.")
      .def(
          "index",
          [](const RngView& r, uint64_t n) {
            if (n == 0) throw py::value_error("Rng.index(n): n must be at least 1");
            return UniformIndex(r.Get(), n);
          },
          py::arg("n"), "A uniform integer in [0, n).")
      .def(
          "random", [](const RngView& r) { return Uniform01(r.Get()); }, "A uniform float in [0, 1).");
}

}  // namespace fedprof::python
