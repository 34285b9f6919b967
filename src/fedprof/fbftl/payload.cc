#include "fedprof/fbftl/payload.h"

#include <torch/torch.h>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {

std::vector<LayerCount> DescribeLayers(const std::string& model, int64_t channels, int64_t height,
                                       int64_t width, int64_t classes) {
  if (model != "vgg16") throw Error("--model: unknown architecture '" + model + "'; expected vgg16");
  std::vector<LayerCount> layers;
  // VGG-16 (Simonyan and Zisserman 2015), configuration D: 3x3 convs, "M" =
  // 2x2 max-pool.
  const std::vector<int> config = {64, 64, -1, 128, 128, -1, 256, 256, 256, -1,
                                   512, 512, 512, -1, 512, 512, 512, -1};
  int64_t c = channels, h = height, w = width;
  int conv = 0;
  for (int out : config) {
    if (out < 0) {
      h /= 2;
      w /= 2;
      continue;
    }
    LayerCount l;
    l.name = "conv" + std::to_string(++conv);
    l.inputs = h * w * c;
    l.params = out * (3 * 3 * c + 1);
    l.macs = static_cast<double>(h * w) * static_cast<double>(l.params);
    layers.push_back(l);
    c = out;
  }
  const std::vector<int64_t> dense = {h * w * c, 4096, 4096, 4096, 512, classes};
  for (size_t i = 0; i + 1 < dense.size(); ++i) {
    LayerCount l;
    l.name = "fc" + std::to_string(i + 1);
    l.inputs = dense[i];
    l.params = dense[i + 1] * (dense[i] + 1);
    l.macs = static_cast<double>(l.params);
    layers.push_back(l);
  }
  return layers;
}

std::vector<LayerCount> CountStageLayers(StagedModel& model,
                                         const std::vector<int64_t>& input_shape) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  at::Tensor h = torch::zeros(shape);
  std::vector<LayerCount> layers;
  for (size_t i = 0; i < model.num_stages(); ++i) {
    LayerCount l;
    l.name = model.stage_names()[i];
    l.inputs = h.numel();
    bool conv = false;
    for (const auto& p : model.StageParameters(i, i + 1)) {
      l.params += p.numel();
      conv = conv || p.dim() == 4;
    }
    // A conv stage runs its kernels at every input position (stride 1, same
    // padding, as the paper counts); a dense one once, even on image input.
    const double spatial = conv && h.dim() == 4 ? static_cast<double>(h.size(2) * h.size(3)) : 1.0;
    l.macs = spatial * static_cast<double>(l.params);
    layers.push_back(l);
    h = model.ForwardStages(h, i, i + 1);
  }
  return layers;
}

std::vector<SchemePayload> ClosedFormPayloads(const std::vector<LayerCount>& layers,
                                              const std::string& cut, const PayloadSetup& s) {
  size_t mc = 0;
  while (mc < layers.size() && layers[mc].name != cut) ++mc;
  if (mc == layers.size()) throw Error("--cut: no layer named '" + cut + "'");
  double all = 0, head = 0, body_macs = 0, head_macs = 0;
  for (size_t m = 0; m < layers.size(); ++m) {
    all += static_cast<double>(layers[m].params);
    (m < mc ? body_macs : head_macs) += layers[m].macs;
    if (m >= mc) head += static_cast<double>(layers[m].params);
  }
  const double body = all - head;
  const double features = static_cast<double>(layers[mc].inputs);  // N-_{m_c}
  const double d = s.bits;
  const double samples = static_cast<double>(s.clients * s.samples_per_client);  // Σ K_u
  const double per_iteration = static_cast<double>(s.clients) * s.fraction;     // U C
  const double k = static_cast<double>(s.samples_per_client);
  auto iterations = [&](double epochs) { return epochs * static_cast<double>(s.clients) / per_iteration; };

  std::vector<SchemePayload> rows;
  // A gradient scheme sends `broadcast` parameters down each iteration (Eqs.
  // 10-12), `uploaded` values up per client and iteration (Eqs. 2-4), and
  // `returned` values back to each client after its upload.
  auto gradient_scheme = [&](const std::string& name, double epochs, double uploaded,
                             double broadcast, double returned, double trained_macs,
                             double frozen_macs_once) {
    SchemePayload r;
    r.scheme = name;
    const double i = iterations(epochs);
    r.upload_batches = i * per_iteration;                    // I U C
    r.params_per_batch = uploaded;
    r.bits_per_batch = d * uploaded;
    r.uplink_bits = r.upload_batches * r.bits_per_batch;
    r.downlink_bits = d * (i * broadcast + r.upload_batches * returned);
    // Eqs. 14-16, counted per sample: forward and backward over what trains
    // for every sample of every epoch, plus one forward pass of a frozen part.
    r.client_macs = 2 * epochs * samples * trained_macs + samples * frozen_macs_once;
    rows.push_back(r);
  };
  gradient_scheme("FL", s.epochs_fl, all, all, 0, body_macs + head_macs, 0);
  // SFL (split learning of the head, FedAvg of the client part): a client
  // uploads its K_u samples' smashed data and its part's gradient, and gets
  // the gradient of the smashed data back; the client part is broadcast.
  // Table III prints body + N- per batch (one sample's smashed data) and the
  // broadcast alone as its downlink.
  gradient_scheme("SFL", s.epochs_fl, body + k * features, body, k * features, body_macs, 0);
  gradient_scheme("FTL_f", s.epochs_ftl_f, all, all, 0, body_macs + head_macs, 0);
  gradient_scheme("FTL_c", s.epochs_ftl_c, head, all, 0, head_macs, body_macs);
  SchemePayload fb;
  fb.scheme = "FbFTL";
  fb.upload_batches = samples;                 // one upload per sample
  fb.params_per_batch = features;
  fb.bits_per_batch = d * features;
  fb.uplink_bits = d * samples * features;     // Eq. 6
  fb.downlink_bits = d * body;                 // Eq. 13
  fb.client_macs = samples * body_macs;        // Eq. 17
  rows.push_back(fb);
  return rows;
}

std::vector<LayerCount> PayloadLayers(const std::string& model, const std::vector<int64_t>& input,
                                      int64_t classes) {
  if (input.size() != 3) throw Error("--input: expected CxHxW, e.g. 3x224x224");
  if (model == "vgg16") return DescribeLayers(model, input[0], input[1], input[2], classes);
  const bool is_file = FileExists(model);
  if (!is_file && model != "vgg_small" && model != "lenet5") {
    throw Error("--model: '" + model + "' is not vgg16, vgg_small, lenet5 or an existing model file");
  }
  auto net = is_file ? LoadStagedModel(model, input, classes) : MakeStagedModel(model, input, classes);
  try {
    return CountStageLayers(*net, input);
  } catch (const c10::Error&) {
    throw Error("--input " + std::to_string(input[0]) + "x" + std::to_string(input[1]) + "x" +
                std::to_string(input[2]) + ": " + model + " does not accept it");
  }
}

}  // namespace fedprof
