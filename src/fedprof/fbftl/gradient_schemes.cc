// FL, FTL_f, FTL_c and SFL: the schemes whose clients upload gradients every
// iteration (FbFTL paper, Section III-A to III-C).
#include <torch/torch.h>

#include <cstdio>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/fbftl/channel.h"
#include "fedprof/fbftl/compression.h"
#include "fedprof/fbftl/scheme_runner.h"
#include "fedprof/models/staged_model.h"
#include "fedprof/privacy/gaussian_mechanism.h"
#include "fedprof/privacy/rdp.h"
#include "transfer.pb.h"

namespace fedprof {
namespace {

void SetGrads(const std::vector<at::Tensor>& params, const std::vector<double>& flat) {
  size_t k = 0;
  for (const at::Tensor& p : params) {
    at::Tensor g = torch::empty_like(p);
    float* dst = g.data_ptr<float>();
    for (int64_t i = 0; i < p.numel(); ++i) dst[i] = static_cast<float>(flat[k++]);
    p.mutable_grad() = g;
  }
}

void ZeroGrads(const std::vector<at::Tensor>& params) {
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

// The loss a client's gradient upload is the gradient of: summed over its
// samples, so the server divides by K_u.
at::Tensor SummedLoss(const at::Tensor& logits, const at::Tensor& labels) {
  return torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

// One server step on the mean of the received per-sample-mean gradients;
// nothing when no upload arrived.
void AverageStep(torch::optim::SGD& optimizer, const std::vector<at::Tensor>& params,
                 std::vector<double>& sum, int received) {
  if (received == 0) return;
  for (double& v : sum) v /= received;
  SetGrads(params, sum);
  optimizer.step();
}

// The server's broadcast of `params` at the start of an iteration.
void Broadcast(const std::vector<at::Tensor>& params, int64_t iteration, SchemeRun* run) {
  wire::Download d;
  d.set_iteration(static_cast<uint64_t>(iteration));
  EncodeValues(Concat(params, false), Compression{}, d.mutable_values());
  CountDownload(d, run);
}

// Sends a client's gradient upload over `uplink`; the server decodes it and
// adds g / K_u to `sum`. False when the upload was lost or refused (with a
// line saying why).
bool DeliverGradient(const wire::GradientUpload& up, Uplink& uplink, int64_t length,
                     std::vector<double>* sum, SchemeRun* run) {
  const std::string bytes = up.SerializeAsString();
  if (!uplink.Send(static_cast<int64_t>(bytes.size()), WireValueBits(up.gradient()), run)) {
    return false;
  }
  wire::GradientUpload got;
  std::vector<float> values;
  try {
    if (!got.ParseFromString(bytes)) throw Error("gradient upload: not a GradientUpload message");
    values = DecodeValues(got.gradient(), length, "gradient upload");
    if (static_cast<int64_t>(values.size()) != length) {
      throw Error("gradient upload: " + std::to_string(values.size()) + " values, expected " +
                  std::to_string(length));
    }
    if (!AllFinite(values)) throw Error("gradient upload: non-finite value");
    if (got.samples() == 0) throw Error("gradient upload: zero samples");
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: client %u skipped: %s\n", run->scheme.c_str(), got.client(),
                 e.what());
    ++run->rejected_uploads;
    return false;
  }
  const auto samples = static_cast<double>(got.samples());
  for (size_t i = 0; i < values.size(); ++i) (*sum)[i] += values[i] / samples;
  return true;
}

}  // namespace

// Every selected client uploads the gradient of its summed loss over what
// trains (FL: the whole network from scratch; FTL_f: the whole source;
// FTL_c: a fresh head on the frozen extractor's features); the server steps
// SGD on the mean of g_u / K_u.
void RunGradientScheme(const SchemeSetup& setup, const std::string& scheme, SchemeRun* run) {
  const RunOptions::Transfer& o = setup.options;
  const uint64_t id = SchemeId(scheme);
  const size_t cut = setup.cut;
  auto net = setup.source.Clone();
  const size_t m = net->num_stages();
  SeedTorch(setup.seed, id);
  if (scheme == "FL") net->Reinitialize(0, m);
  if (scheme == "FTL_c") net->Reinitialize(cut, m);
  const size_t from = scheme == "FTL_c" ? cut : 0;
  const std::vector<at::Tensor> all = net->StageParameters(0, m);
  const std::vector<at::Tensor> trained = net->StageParameters(from, m);
  const int64_t length = Numel(trained);
  torch::optim::SGD optimizer = MakeSgd(trained, o);
  // FTL_c clients pass their samples through the frozen extractor once
  // (Eq. 16) and train the head on the result.
  std::vector<at::Tensor> inputs(setup.clients.size());
  at::Tensor test_x = setup.test.x;
  for (size_t u = 0; u < setup.clients.size(); ++u) {
    const ClientData& data = setup.clients[u];
    if (data.size() == 0) continue;
    inputs[u] = from == 0 ? data.x : Features(*net, cut, data.x);
    if (from > 0)
      run->client_macs += static_cast<double>(data.size()) * MacsOf(setup.layers, 0, cut);
  }
  if (from > 0) test_x = Features(*net, cut, setup.test.x);
  std::vector<ErrorFeedback> feedback(setup.compression.is_dense() ? 0 : setup.clients.size());
  Uplink uplink(setup, id);
  const double trained_macs = MacsOf(setup.layers, from, m);
  int64_t iterations = 0;
  auto iterate = [&](int64_t iteration, const std::vector<size_t>& selected) {
    Broadcast(all, iteration, run);
    std::vector<double> sum(static_cast<size_t>(length), 0.0);
    int received = 0;
    for (size_t u : selected) {
      const ClientData& data = setup.clients[u];
      // Client: gradient of the summed loss on its samples.
      net->train(true);
      ZeroGrads(all);
      SummedLoss(net->ForwardStages(inputs[u], from, m), data.y).backward();
      run->client_macs += 2 * static_cast<double>(data.size()) * trained_macs;
      std::vector<float> g = Concat(trained, true);
      if (o.dp_noise > 0) {
        Rng noise = MakeRng(setup.seed, Stream::kPrivacy,
                            {id, static_cast<uint64_t>(iteration), static_cast<uint64_t>(u)});
        AddClippedGaussianNoise(g, o.dp_clip, o.dp_noise, noise);
      }
      wire::GradientUpload up;
      up.set_client(static_cast<uint32_t>(u));
      up.set_samples(static_cast<uint32_t>(data.size()));
      if (feedback.empty()) {
        EncodeValues(g, setup.compression, up.mutable_gradient());
      } else {
        feedback[u].Encode(g, setup.compression, up.mutable_gradient());
      }
      ++run->upload_batches;
      if (DeliverGradient(up, uplink, length, &sum, run)) ++received;
    }
    AverageStep(optimizer, trained, sum, received);
    iterations = iteration + 1;
  };
  ForEachIteration(setup, id, run, iterate,
                   [&] { return Accuracy(*net, from, test_x, setup.test.y); });
  if (o.dp_noise > 0) {
    run->epsilon = SampledGaussianEpsilon(static_cast<double>(setup.per_iteration) /
                                              static_cast<double>(setup.clients.size()),
                                          o.dp_noise, iterations, o.dp_delta)
                       .epsilon;
  }
}

// SFL: the client part (stages before the cut) is federated, the head trains
// on the server by split learning. A selected client uploads its smashed
// data, gets back the gradient with respect to it, and uploads its part's
// gradient; the server averages both parts' gradients per iteration.
void RunSflScheme(const SchemeSetup& setup, SchemeRun* run) {
  const RunOptions::Transfer& o = setup.options;
  const uint64_t id = SchemeId("SFL");
  const size_t cut = setup.cut;
  auto net = setup.source.Clone();
  const size_t m = net->num_stages();
  SeedTorch(setup.seed, id);
  net->Reinitialize(0, m);
  const std::vector<at::Tensor> client_part = net->StageParameters(0, cut);
  const std::vector<at::Tensor> server_part = net->StageParameters(cut, m);
  const int64_t client_length = Numel(client_part);
  torch::optim::SGD client_opt = MakeSgd(client_part, o);
  torch::optim::SGD server_opt = MakeSgd(server_part, o);
  Uplink uplink(setup, id);
  const double client_macs = MacsOf(setup.layers, 0, cut);
  auto iterate = [&](int64_t iteration, const std::vector<size_t>& selected) {
    Broadcast(client_part, iteration, run);
    std::vector<double> client_sum(static_cast<size_t>(client_length), 0.0);
    std::vector<double> server_sum(static_cast<size_t>(Numel(server_part)), 0.0);
    int client_received = 0, server_received = 0;
    for (size_t u : selected) {
      const ClientData& data = setup.clients[u];
      net->train(true);
      ZeroGrads(client_part);
      ZeroGrads(server_part);
      const at::Tensor z = net->ForwardStages(data.x, 0, cut);
      wire::GradientUpload smashed;
      smashed.set_client(static_cast<uint32_t>(u));
      smashed.set_samples(static_cast<uint32_t>(data.size()));
      EncodeValues(ToVector(z), Compression{}, smashed.mutable_smashed());
      ++run->upload_batches;
      if (!uplink.Send(static_cast<int64_t>(smashed.ByteSizeLong()),
                       WireValueBits(smashed.smashed()), run)) {
        continue;
      }
      // Server: the head's forward and backward pass on the smashed data.
      const at::Tensor z_server = z.detach().clone().requires_grad_(true);
      SummedLoss(net->ForwardStages(z_server, cut, m), data.y).backward();
      const std::vector<float> head_grad = Concat(server_part, true);
      for (size_t i = 0; i < head_grad.size(); ++i) {
        server_sum[i] += head_grad[i] / static_cast<double>(data.size());
      }
      ++server_received;
      wire::Download back;
      back.set_iteration(static_cast<uint64_t>(iteration));
      EncodeValues(ToVector(z_server.grad()), Compression{}, back.mutable_values());
      CountDownload(back, run);
      // Client: backpropagate through its part and upload that gradient.
      z.backward(z_server.grad());
      run->client_macs += 2 * static_cast<double>(data.size()) * client_macs;
      wire::GradientUpload up;
      up.set_client(static_cast<uint32_t>(u));
      up.set_samples(static_cast<uint32_t>(data.size()));
      EncodeValues(Concat(client_part, true), Compression{}, up.mutable_gradient());
      if (DeliverGradient(up, uplink, client_length, &client_sum, run)) ++client_received;
    }
    AverageStep(client_opt, client_part, client_sum, client_received);
    AverageStep(server_opt, server_part, server_sum, server_received);
  };
  ForEachIteration(setup, id, run, iterate,
                   [&] { return Accuracy(*net, 0, setup.test.x, setup.test.y); });
}

}  // namespace fedprof
