// Data sets from Python (fedprof.Dataset) and a run's model back as a state
// dict.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/files.h"
#include "fedprof/data/memory_data.h"
#include "fedprof/models/models.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/run/simulation.h"
#include "fedprof/sim/population.h"
#include "python/hooks.h"

namespace fedprof::python {
namespace {

// Registered data, unregistered when Python lets go of it.
class DataHandle {
 public:
  explicit DataHandle(std::string key) : key_(std::move(key)) {}
  ~DataHandle() { UnregisterMemoryData(key_); }
  DataHandle(const DataHandle&) = delete;
  DataHandle& operator=(const DataHandle&) = delete;
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// `a`'s values as a tensor without a copy; the tensor keeps the array alive
// (released with the GIL, from whichever thread frees the tensor last).
template <class T>
torch::Tensor Share(py::array_t<T, py::array::c_style> a, torch::ScalarType type) {
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  T* data = const_cast<T*>(a.data());  // never written: from_blob wants a non-const pointer
  auto* owner = new py::object(std::move(a));
  return torch::from_blob(
      data, shape,
      [owner](void*) {
        py::gil_scoped_acquire gil;
        delete owner;
      },
      torch::TensorOptions().dtype(type));
}

Dataset MakeSet(const py::array_t<float, py::array::c_style>& x, const py::array& y, int64_t num_classes) {
  Dataset d;
  d.x = Share(x, torch::kFloat32);
  d.num_classes = num_classes;
  if (num_classes > 0) {
    d.y = Share(py::array_t<int64_t, py::array::c_style>::ensure(y), torch::kInt64);
  } else {
    d.y = Share(py::array_t<float, py::array::c_style>::ensure(y), torch::kFloat32);
  }
  d.name = "memory";
  return d;
}

std::shared_ptr<DataHandle> RegisterData(const py::array_t<float, py::array::c_style>& train_x,
                                         const py::array& train_y,
                                         const py::array_t<float, py::array::c_style>& test_x,
                                         const py::array& test_y, int64_t num_classes,
                                         const std::vector<std::vector<int64_t>>& partition,
                                         const std::string& origin) {
  MemoryData data;
  data.train = MakeSet(train_x, train_y, num_classes);
  data.test = MakeSet(test_x, test_y, num_classes);
  data.partition = partition;
  try {
    return std::make_shared<DataHandle>(RegisterMemoryData(std::move(data), origin));
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

// The test set of the run in `out`, loaded as its config says: what its
// model's shape follows.
Dataset RunTestSet(const std::string& out) {
  Config config;
  config.MergeTomlFile(out + "/config.toml");
  const RunOptions& o = config.options();
  return LoadData(o.data, static_cast<uint64_t>(o.seed)).test;
}

// The global model of the run in `out` as {name: array} (parameters, then
// buffers), in the model's own names.
py::dict StateDict(const std::string& out, const py::object& parts) {
  PendingException pending;
  const PythonParts registered(parts, &pending);  // so that the config names them
  std::shared_ptr<Model> model;
  int64_t version = 0;
  {
    py::gil_scoped_release release;
    const OneThreadCompute one_thread;
    try {
      model = LoadRunModel(out, RunTestSet(out), &version);
    } catch (const Error& e) {
      throw std::runtime_error(e.what());
    }
  }
  py::dict state;
  auto add = [&](const std::string& name, const torch::Tensor& t) {
    const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    std::vector<py::ssize_t> shape(c.sizes().begin(), c.sizes().end());
    if (c.scalar_type() == torch::kFloat32) {
      py::array_t<float> a(shape);
      std::memcpy(a.mutable_data(), c.data_ptr<float>(), c.numel() * sizeof(float));
      state[py::str(name)] = a;
    } else {
      const torch::Tensor l = c.to(torch::kInt64);
      py::array_t<int64_t> a(shape);
      std::memcpy(a.mutable_data(), l.data_ptr<int64_t>(), l.numel() * sizeof(int64_t));
      state[py::str(name)] = a;
    }
  };
  for (const auto& p : model->named_parameters()) add(p.key(), p.value());
  for (const auto& b : model->named_buffers()) add(b.key(), b.value());
  return state;
}

Profile ProfileFrom(const py::dict& d) {
  Profile p;
  p.layer = d["layer"].cast<std::string>();
  p.version = d["version"].cast<int64_t>();
  p.mean = d["mean"].cast<std::vector<double>>();
  p.var = d["var"].cast<std::vector<double>>();
  return p;
}

py::dict ProfileDict(const Profile& p, int64_t samples) {
  py::dict d;
  d["layer"] = p.layer;
  d["version"] = p.version;
  d["samples"] = samples;
  d["mean"] = py::array_t<double>(static_cast<py::ssize_t>(p.mean.size()), p.mean.data());
  d["var"] = py::array_t<double>(static_cast<py::ssize_t>(p.var.size()), p.var.data());
  return d;
}

// The representation profile (Eq. 8) of inputs `x` under the run's final
// model, at its profiled layer or `layer`.
py::dict ProfileOf(const std::string& out, const py::array_t<float, py::array::c_style>& x,
                   const std::string& layer, const py::object& parts) {
  PendingException pending;
  const PythonParts registered(parts, &pending);  // so that the config names them
  Dataset data;
  data.x = Share(x, torch::kFloat32);
  data.name = "fedprof.profile";
  Profile p;
  {
    py::gil_scoped_release release;
    const OneThreadCompute one_thread;
    try {
      // The model is shaped by the run's data: its classes or targets.
      const Dataset run_data = RunTestSet(out);
      data.num_classes = run_data.num_classes;
      std::vector<int64_t> targets = run_data.y.sizes().vec();  // never read: the model's shape only
      targets[0] = data.x.size(0);
      data.y = run_data.y.narrow(0, 0, 1).expand(targets);
      int64_t version = 0;
      std::shared_ptr<Model> model = LoadRunModel(out, data, &version);
      if (!layer.empty()) model->SetProfiledLayer(layer);
      p = ComputeProfile(*model, data, version);
    } catch (const Error& e) {
      throw std::runtime_error(e.what());
    }
  }
  return ProfileDict(p, data.size());
}

// Eq. 9's divergence of `profile` from `reference`, Eq. 13's score and the
// per-unit KL (Eq. 10).
py::dict DivergenceOf(const py::dict& profile, const py::dict& reference, double alpha) {
  const Profile p = ProfileFrom(profile), r = ProfileFrom(reference);
  std::string why = CheckProfile(r, r);
  if (!why.empty()) throw py::value_error("reference: " + why);
  why = CheckProfile(p, r);
  if (!why.empty()) throw py::value_error("profile: " + why);
  const std::vector<double> kl = UnitKl(p, r);
  const double div = Divergence(p, r);
  py::dict d;
  d["divergence"] = div;
  d["score"] = Score(div, alpha);
  d["kl"] = py::array_t<double>(static_cast<py::ssize_t>(kl.size()), kl.data());
  return d;
}

py::dict ReadProfile(const std::string& path) {
  try {
    const Profile p = ProfileFromJson(ReadFile(path), path);
    return ProfileDict(p, -1);
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

void BindData(py::module_& m) {
  m.def("profile", &ProfileOf, py::arg("out"), py::arg("x"), py::arg("layer"), py::arg("parts"));
  m.def("divergence", &DivergenceOf, py::arg("profile"), py::arg("reference"), py::arg("alpha"));
  m.def("read_profile", &ReadProfile, py::arg("path"));
  py::class_<DataHandle, std::shared_ptr<DataHandle>>(m, "DataHandle")
      .def_property_readonly("key", &DataHandle::key);
  m.def("register_data", &RegisterData, py::arg("train_x"), py::arg("train_y"), py::arg("test_x"),
        py::arg("test_y"), py::arg("num_classes"), py::arg("partition"), py::arg("origin"));
  m.def("state_dict", &StateDict, py::arg("out"), py::arg("parts"));
}

}  // namespace fedprof::python
