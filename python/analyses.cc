// The analyses of `fedprof payload` and `fedprof privacy` as Python
// functions returning their figures.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "fedprof/fbftl/payload.h"
#include "fedprof/privacy/label_leakage.h"
#include "fedprof/privacy/rdp.h"
#include "python/hooks.h"

namespace fedprof::python {
namespace {

py::list Payload(const std::string& model, const std::vector<int64_t>& input, int64_t classes,
                 const std::string& cut, const PayloadSetup& setup) {
  std::vector<SchemePayload> rows;
  try {
    rows = ClosedFormPayloads(PayloadLayers(model, input, classes), cut, setup);
  } catch (const Error& e) {
    throw py::value_error(e.what());
  }
  py::list out;
  for (const SchemePayload& r : rows) {
    py::dict d;
    d["scheme"] = r.scheme;
    d["upload_batches"] = r.upload_batches;
    d["params_per_batch"] = r.params_per_batch;
    d["bits_per_batch"] = r.bits_per_batch;
    d["uplink_bits"] = r.uplink_bits;
    d["downlink_bits"] = r.downlink_bits;
    d["client_macs"] = r.client_macs;
    out.append(d);
  }
  return out;
}

py::dict DpEpsilon(double noise_multiplier, double sample_rate, int64_t steps, double delta) {
  if (!(noise_multiplier >= 0) || !(sample_rate >= 0 && sample_rate <= 1) || steps < 0 ||
      !(delta > 0 && delta < 1)) {
    throw py::value_error(
        "dp_epsilon: expected noise_multiplier >= 0, 0 <= sample_rate <= 1, steps >= 0 "
        "and 0 < delta < 1");
  }
  const EpsilonAtOrder e = SampledGaussianEpsilon(sample_rate, noise_multiplier, steps, delta);
  py::dict d;
  d["epsilon"] = e.epsilon;
  d["order"] = e.order;
  return d;
}

py::dict LabelLeakage(int classes, int samples_per_client, std::vector<double> distribution, int64_t clients,
                      uint64_t seed) {
  if (classes < 1 || samples_per_client < 1 || clients < 0) {
    throw py::value_error("label_leakage: expected classes >= 1, samples_per_client >= 1 and clients >= 0");
  }
  const std::vector<double> uniform(classes, 1.0 / classes);
  if (distribution.empty()) distribution = uniform;
  if (static_cast<int>(distribution.size()) != classes) {
    throw py::value_error("label_leakage: " + std::to_string(distribution.size()) + " probabilities for " +
                          std::to_string(classes) + " classes");
  }
  py::dict d;
  const double h_uniform = BatchEntropyBits(uniform, samples_per_client);
  const double h_true = BatchEntropyBits(distribution, samples_per_client);
  d["batch_types"] = NumBatchTypes(classes, samples_per_client);
  d["h_uniform_bits"] = h_uniform;
  d["h_true_bits"] = h_true;
  d["leakage_s_bits"] = h_uniform - h_true;
  if (clients > 0) {
    const double h_query = EmpiricalBatchEntropyBits(distribution, samples_per_client, clients, seed);
    d["clients"] = clients;
    d["h_query_bits"] = h_query;
    d["leakage_q_bits"] = h_true - h_query;
    d["leakage_t_bits"] = h_uniform - h_query;
  }
  return d;
}

}  // namespace

void BindAnalyses(py::module_& m) {
  py::class_<PayloadSetup>(m, "PayloadSetup")
      .def(py::init<>())
      .def_readwrite("clients", &PayloadSetup::clients)
      .def_readwrite("samples_per_client", &PayloadSetup::samples_per_client)
      .def_readwrite("fraction", &PayloadSetup::fraction)
      .def_readwrite("bits", &PayloadSetup::bits)
      .def_readwrite("epochs_fl", &PayloadSetup::epochs_fl)
      .def_readwrite("epochs_ftl_f", &PayloadSetup::epochs_ftl_f)
      .def_readwrite("epochs_ftl_c", &PayloadSetup::epochs_ftl_c);
  m.def("payload", &Payload, py::arg("model"), py::arg("input"), py::arg("classes"), py::arg("cut"),
        py::arg("setup"));
  m.def("dp_epsilon", &DpEpsilon, py::arg("noise_multiplier"), py::arg("sample_rate"), py::arg("steps"),
        py::arg("delta"));
  m.def("label_leakage", &LabelLeakage, py::arg("classes"), py::arg("samples_per_client"),
        py::arg("distribution"), py::arg("clients"), py::arg("seed"));
}

}  // namespace fedprof::python
