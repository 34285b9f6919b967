#include "fedprof/fbftl/schemes.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"
#include "fedprof/fbftl/compression.h"
#include "fedprof/fbftl/stage_network.h"
#include "fedprof/privacy/rdp.h"
#include "transfer.pb.h"

namespace fedprof {
namespace {

struct Options {
  uint64_t seed = 1;
  std::string cut;
  int64_t clients = 0, samples_per_client = 0, per_iteration = 0;
  int epochs = 0, head_epochs = 0, patience = 0;
  bool refit = false;
  int64_t batch_size = 64;
  double validation_share = 0, lr = 0, momentum = 0, weight_decay = 0, sample_share = 1;
  Compression compression;
  double packet_loss = 0;
  int retransmissions = 0;
  int64_t blocks_per_packet = 1;
  double dp_noise = 0, dp_clip = 1, dp_delta = 1e-6;
  bool dp_paper_form = false;
};

Options ReadOptions(const Config& c) {
  Options o;
  o.seed = static_cast<uint64_t>(c.GetInt("seed"));
  o.cut = c.GetString("transfer.cut");
  o.clients = c.GetInt("transfer.clients");
  o.samples_per_client = c.GetInt("transfer.samples_per_client");
  o.per_iteration = std::max<int64_t>(
      1, std::llround(static_cast<double>(o.clients) * c.GetDouble("transfer.fraction")));
  o.epochs = static_cast<int>(c.GetInt("transfer.epochs"));
  o.head_epochs = static_cast<int>(c.GetInt("transfer.head_epochs"));
  o.patience = static_cast<int>(c.GetInt("transfer.patience"));
  o.refit = c.GetBool("transfer.refit");
  o.batch_size = c.GetInt("transfer.batch_size");
  o.validation_share = c.GetDouble("transfer.validation_share");
  o.lr = c.GetDouble("transfer.lr");
  o.momentum = c.GetDouble("transfer.momentum");
  o.weight_decay = c.GetDouble("transfer.weight_decay");
  o.sample_share = c.GetDouble("transfer.sample_share");
  o.compression.keep_ratio = c.GetDouble("transfer.keep_ratio");
  o.compression.bits = static_cast<int>(c.GetInt("transfer.bits"));
  o.compression.quantizer = c.GetString("transfer.quantizer") == "symmetric"
                                ? Quantizer::kSymmetric
                                : Quantizer::kMinMax;
  o.blocks_per_packet = c.GetInt("transfer.blocks_per_packet");
  o.packet_loss = PacketLossRate(c.GetDouble("transfer.block_loss"),
                                 static_cast<int>(o.blocks_per_packet));
  o.retransmissions = static_cast<int>(c.GetInt("transfer.retransmissions"));
  o.dp_noise = c.GetDouble("transfer.dp_noise");
  o.dp_clip = c.GetDouble("transfer.dp_clip");
  o.dp_delta = c.GetDouble("transfer.dp_delta");
  o.dp_paper_form = c.GetString("transfer.dp_form") == "paper";
  return o;
}

// Scheme ids, part of every random stream's tag so schemes draw independently.
const std::map<std::string, uint64_t>& SchemeIds() {
  static const std::map<std::string, uint64_t> ids = {
      {"FL", 1}, {"FTL_f", 2}, {"FTL_c", 3}, {"SFL", 4}, {"FbFTL", 5}};
  return ids;
}

void SeedTorch(uint64_t seed, uint64_t scheme) {
  torch::manual_seed(Mix64(seed ^ Mix64(static_cast<uint64_t>(Stream::kModelInit) + 97 * scheme)));
}

struct ClientData {
  at::Tensor x, y;
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
};

std::vector<float> ToVector(const at::Tensor& t) {
  at::Tensor c = t.detach().to(torch::kFloat32).contiguous().reshape({-1});
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<float> Concat(const std::vector<at::Tensor>& tensors, bool grads) {
  std::vector<float> out;
  for (const at::Tensor& t : tensors) {
    const at::Tensor v = grads ? (t.grad().defined() ? t.grad() : torch::zeros_like(t)) : t;
    const std::vector<float> part = ToVector(v);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

int64_t Numel(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

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

torch::optim::SGD MakeSgd(const std::vector<at::Tensor>& params, double lr, double momentum,
                          double weight_decay) {
  return torch::optim::SGD(
      params, torch::optim::SGDOptions(lr).momentum(momentum).weight_decay(weight_decay));
}

bool AllFinite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

// The clipped Gaussian mechanism: scale v to L2 norm at most S, add
// N(0, σ² S²) to every element.
void AddClippedNoise(std::vector<float>& v, double clip, double sigma, Rng& rng) {
  double norm = 0;
  for (float f : v) norm += static_cast<double>(f) * f;
  norm = std::sqrt(norm);
  const double scale = norm > clip ? clip / norm : 1.0;
  for (float& f : v) f = static_cast<float>(f * scale + sigma * clip * StandardNormal(rng));
}

double Accuracy(StageNetwork& net, size_t from, const at::Tensor& x, const at::Tensor& y) {
  torch::NoGradGuard no_grad;
  net.SetTraining(false);
  int64_t correct = 0;
  for (int64_t i = 0; i < x.size(0); i += 256) {
    const int64_t end = std::min<int64_t>(x.size(0), i + 256);
    const at::Tensor out = net.Forward(x.slice(0, i, end), from, net.num_stages());
    correct += out.argmax(1).eq(y.slice(0, i, end)).sum().item<int64_t>();
  }
  return x.size(0) > 0 ? static_cast<double>(correct) / static_cast<double>(x.size(0)) : 0;
}

at::Tensor Features(StageNetwork& net, size_t cut, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  net.SetTraining(false);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < x.size(0); i += 256) {
    parts.push_back(net.Forward(x.slice(0, i, std::min<int64_t>(x.size(0), i + 256)), 0, cut));
  }
  return torch::cat(parts).flatten(1);
}

// The uplink: every packet is lost with probability PLR per transmission and
// sent again up to n_r times (Eq. 19); each transmission's bytes count.
class Uplink {
 public:
  Uplink(const Options& o, uint64_t scheme) : o_(o), rng_(MakeRng(o.seed, Stream::kNoise, {scheme, 1})) {}
  // True when the packet arrives.
  bool Send(int64_t bytes, int64_t value_bits, SchemeRun* run) {
    for (int n = 0; n <= o_.retransmissions; ++n) {
      ++run->transmissions;
      run->uplink_bytes += bytes;
      run->uplink_value_bits += value_bits;
      if (o_.packet_loss == 0 || Uniform01(rng_) >= o_.packet_loss) return true;
    }
    ++run->lost_uploads;
    return false;
  }

 private:
  const Options& o_;
  Rng rng_;
};

void CountDownload(const wire::Download& d, SchemeRun* run) {
  run->downlink_bytes += static_cast<int64_t>(d.ByteSizeLong());
  run->downlink_value_bits += WireValueBits(d.values());
}

void Broadcast(const std::vector<at::Tensor>& params, int64_t iteration, SchemeRun* run) {
  wire::Download d;
  d.set_iteration(static_cast<uint64_t>(iteration));
  EncodeValues(Concat(params, false), Compression{}, d.mutable_values());
  CountDownload(d, run);
}

double MacsOf(const std::vector<LayerCount>& layers, size_t from, size_t to) {
  double x = 0;
  for (size_t m = from; m < to; ++m) x += layers[m].macs;
  return x;
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
    std::fprintf(stderr, "%s: client %u skipped: %s\n", run->scheme.c_str(), got.client(), e.what());
    ++run->rejected_uploads;
    return false;
  }
  const auto samples = static_cast<double>(got.samples());
  for (size_t i = 0; i < values.size(); ++i) (*sum)[i] += values[i] / samples;
  return true;
}

class Runner {
 public:
  Runner(const Options& o, const StageNetwork& source, std::vector<ClientData> clients,
         const Dataset& test, std::vector<LayerCount> layers, size_t cut)
      : o_(o), source_(source), clients_(std::move(clients)), test_(test),
        layers_(std::move(layers)), cut_(cut) {}

  // Calls iterate(iteration, clients) for every iteration of o_.epochs
  // epochs (each epoch a seeded permutation of the clients, U·C at a time,
  // those without samples left out) and records the curve with `accuracy`
  // after each epoch.
  void ForEachIteration(uint64_t id, SchemeRun* run,
                        const std::function<void(int64_t, const std::vector<size_t>&)>& iterate,
                        const std::function<double()>& accuracy) {
    int64_t iteration = 0;
    for (int epoch = 1; epoch <= o_.epochs; ++epoch) {
      Rng order_rng = MakeRng(o_.seed, Stream::kSelection, {id, static_cast<uint64_t>(epoch)});
      const std::vector<int64_t> order = Permutation(order_rng, static_cast<int64_t>(clients_.size()));
      for (size_t start = 0; start < order.size(); start += static_cast<size_t>(o_.per_iteration)) {
        const size_t end = std::min(order.size(), start + static_cast<size_t>(o_.per_iteration));
        std::vector<size_t> selected;
        for (size_t i = start; i < end; ++i) {
          const auto u = static_cast<size_t>(order[i]);
          if (clients_[u].size() > 0) selected.push_back(u);
        }
        iterate(iteration++, selected);
      }
      run->curve.push_back({epoch, run->uplink_bytes, accuracy()});
    }
    run->accuracy = run->curve.empty() ? 0 : run->curve.back().test_accuracy;
  }

  SchemeRun Run(const std::string& scheme) {
    SchemeRun run;
    run.scheme = scheme;
    if (scheme == "FbFTL") {
      RunFbftl(&run);
    } else if (scheme == "SFL") {
      RunSfl(&run);
    } else {
      RunGradient(scheme, &run);
    }
    return run;
  }

 private:
  // FL, FTL_f, FTL_c: every selected client uploads the gradient of its summed
  // loss over what trains; the server steps SGD on the mean of g_u / K_u.
  void RunGradient(const std::string& scheme, SchemeRun* run) {
    const uint64_t id = SchemeIds().at(scheme);
    auto net = source_.Clone();
    const size_t m = net->num_stages();
    SeedTorch(o_.seed, id);
    if (scheme == "FL") net->Reinitialize(0, m);
    if (scheme == "FTL_c") net->Reinitialize(cut_, m);
    const size_t from = scheme == "FTL_c" ? cut_ : 0;
    const std::vector<at::Tensor> all = net->Parameters(0, m);
    const std::vector<at::Tensor> trained = net->Parameters(from, m);
    const int64_t length = Numel(trained);
    torch::optim::SGD optimizer = MakeSgd(trained, o_.lr, o_.momentum, o_.weight_decay);
    // FTL_c clients pass their samples through the frozen extractor once
    // (Eq. 16) and train the head on the result.
    std::vector<at::Tensor> inputs(clients_.size());
    at::Tensor test_x = test_.x;
    for (size_t u = 0; u < clients_.size(); ++u) {
      if (clients_[u].size() == 0) continue;
      inputs[u] = from == 0 ? clients_[u].x : Features(*net, cut_, clients_[u].x);
      if (from > 0) {
        run->client_macs += static_cast<double>(clients_[u].size()) * MacsOf(layers_, 0, cut_);
      }
    }
    if (from > 0) test_x = Features(*net, cut_, test_.x);
    std::vector<ErrorFeedback> feedback(o_.compression.is_dense() ? 0 : clients_.size());
    Uplink uplink(o_, id);
    const double trained_macs = MacsOf(layers_, from, m);
    int64_t iterations = 0;
    auto iterate = [&](int64_t iteration, const std::vector<size_t>& selected) {
      Broadcast(all, iteration, run);
      std::vector<double> sum(static_cast<size_t>(length), 0.0);
      int received = 0;
      for (size_t u : selected) {
        const ClientData& data = clients_[u];
        // Client: gradient of the summed loss on its samples.
        net->SetTraining(true);
        ZeroGrads(all);
        SummedLoss(net->Forward(inputs[u], from, m), data.y).backward();
        run->client_macs += 2 * static_cast<double>(data.size()) * trained_macs;
        std::vector<float> g = Concat(trained, true);
        if (o_.dp_noise > 0) {
          Rng noise = MakeRng(o_.seed, Stream::kPrivacy,
                              {id, static_cast<uint64_t>(iteration), static_cast<uint64_t>(u)});
          AddClippedNoise(g, o_.dp_clip, o_.dp_noise, noise);
        }
        wire::GradientUpload up;
        up.set_client(static_cast<uint32_t>(u));
        up.set_samples(static_cast<uint32_t>(data.size()));
        if (feedback.empty()) {
          EncodeValues(g, o_.compression, up.mutable_gradient());
        } else {
          feedback[u].Encode(g, o_.compression, up.mutable_gradient());
        }
        ++run->upload_batches;
        if (DeliverGradient(up, uplink, length, &sum, run)) ++received;
      }
      AverageStep(optimizer, trained, sum, received);
      iterations = iteration + 1;
    };
    ForEachIteration(id, run, iterate, [&] { return Accuracy(*net, from, test_x, test_.y); });
    if (o_.dp_noise > 0) {
      run->epsilon = SampledGaussianEpsilon(
                         static_cast<double>(o_.per_iteration) / static_cast<double>(clients_.size()),
                         o_.dp_noise, iterations, o_.dp_delta)
                         .epsilon;
    }
  }

  // SFL: the client part (stages before the cut) is federated, the head
  // trains on the server by split learning. A selected client uploads its
  // smashed data, gets back the gradient with respect to it, and uploads its
  // part's gradient; the server averages both parts' gradients per iteration.
  void RunSfl(SchemeRun* run) {
    const uint64_t id = SchemeIds().at("SFL");
    auto net = source_.Clone();
    const size_t m = net->num_stages();
    SeedTorch(o_.seed, id);
    net->Reinitialize(0, m);
    const std::vector<at::Tensor> client_part = net->Parameters(0, cut_);
    const std::vector<at::Tensor> server_part = net->Parameters(cut_, m);
    const int64_t client_length = Numel(client_part);
    torch::optim::SGD client_opt = MakeSgd(client_part, o_.lr, o_.momentum, o_.weight_decay);
    torch::optim::SGD server_opt = MakeSgd(server_part, o_.lr, o_.momentum, o_.weight_decay);
    Uplink uplink(o_, id);
    const double client_macs = MacsOf(layers_, 0, cut_);
    auto iterate = [&](int64_t iteration, const std::vector<size_t>& selected) {
      Broadcast(client_part, iteration, run);
      std::vector<double> client_sum(static_cast<size_t>(client_length), 0.0);
      std::vector<double> server_sum(static_cast<size_t>(Numel(server_part)), 0.0);
      int client_received = 0, server_received = 0;
      for (size_t u : selected) {
        const ClientData& data = clients_[u];
        net->SetTraining(true);
        ZeroGrads(client_part);
        ZeroGrads(server_part);
        const at::Tensor z = net->Forward(data.x, 0, cut_);
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
        SummedLoss(net->Forward(z_server, cut_, m), data.y).backward();
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
    ForEachIteration(id, run, iterate, [&] { return Accuracy(*net, 0, test_.x, test_.y); });
  }

  // FbFTL (Alg. 1): the extractor goes down once; each client uploads (z, y)
  // once per sample; the server trains the head on the pooled features.
  void RunFbftl(SchemeRun* run) {
    const uint64_t id = SchemeIds().at("FbFTL");
    auto net = source_.Clone();
    wire::Download extractor;
    EncodeValues(Concat(net->Parameters(0, cut_), false), Compression{},
                 extractor.mutable_values());
    CountDownload(extractor, run);
    Uplink uplink(o_, id);
    std::vector<float> pooled;
    std::vector<int64_t> labels;
    int64_t width = 0;
    const int64_t classes = test_.num_classes;
    for (size_t u = 0; u < clients_.size(); ++u) {
      const ClientData& data = clients_[u];
      if (data.size() == 0) continue;
      const at::Tensor z = Features(*net, cut_, data.x);
      width = z.size(1);
      run->client_macs += static_cast<double>(data.size()) * MacsOf(layers_, 0, cut_);
      Rng noise = MakeRng(o_.seed, Stream::kPrivacy, {id, 0, static_cast<uint64_t>(u)});
      // The paper's form scales the noise by the client's largest difference
      // between two samples' features, divided by K (Section V-B).
      double spread = 0;
      if (o_.dp_noise > 0 && o_.dp_paper_form) {
        spread = (std::get<0>(z.max(0)) - std::get<0>(z.min(0))).max().item<double>() /
                 static_cast<double>(data.size());
      }
      std::vector<std::string> packet;
      int64_t packet_bytes = 0, packet_bits = 0;
      auto flush = [&] {
        if (packet.empty()) return;
        if (uplink.Send(packet_bytes, packet_bits, run)) {
          for (const std::string& bytes : packet) ReceiveFeatures(bytes, width, classes, &pooled, &labels, run);
        }
        packet.clear();
        packet_bytes = packet_bits = 0;
      };
      for (int64_t k = 0; k < data.size(); ++k) {
        std::vector<float> features = ToVector(z[k]);
        if (o_.dp_noise > 0) {
          if (o_.dp_paper_form) {
            for (float& f : features) f += static_cast<float>(o_.dp_noise * spread * StandardNormal(noise));
          } else {
            AddClippedNoise(features, o_.dp_clip, o_.dp_noise, noise);
          }
        }
        wire::FeatureUpload up;
        up.set_client(static_cast<uint32_t>(u));
        up.set_label(static_cast<uint32_t>(data.y[k].item<int64_t>()));
        EncodeValues(features, o_.compression, up.mutable_features());
        ++run->upload_batches;
        packet.push_back(up.SerializeAsString());
        packet_bytes += static_cast<int64_t>(packet.back().size());
        packet_bits += WireValueBits(up.features());
        if (static_cast<int64_t>(packet.size()) == o_.blocks_per_packet) flush();
      }
      flush();
    }
    TrainHead(*net, pooled, labels, width, run);
    if (o_.dp_noise > 0) {
      run->epsilon = SampledGaussianEpsilon(1.0, o_.dp_noise, 1, o_.dp_delta).epsilon;
    }
  }

  void ReceiveFeatures(const std::string& bytes, int64_t width, int64_t classes,
                       std::vector<float>* pooled, std::vector<int64_t>* labels, SchemeRun* run) {
    wire::FeatureUpload got;
    try {
      if (!got.ParseFromString(bytes)) throw Error("feature upload: not a FeatureUpload message");
      if (got.label() >= classes) {
        throw Error("feature upload: label " + std::to_string(got.label()) + " outside 0.." +
                    std::to_string(classes - 1));
      }
      const std::vector<float> z = DecodeValues(got.features(), width, "feature upload");
      if (static_cast<int64_t>(z.size()) != width) {
        throw Error("feature upload: " + std::to_string(z.size()) + " features, expected " +
                    std::to_string(width));
      }
      if (!AllFinite(z)) throw Error("feature upload: non-finite value");
      pooled->insert(pooled->end(), z.begin(), z.end());
      labels->push_back(got.label());
    } catch (const Error& e) {
      std::fprintf(stderr, "FbFTL: a sample of client %u skipped: %s\n", got.client(), e.what());
      ++run->rejected_uploads;
    }
  }

  // The server's head training: SGD on minibatches of the pooled (z, y),
  // reshuffled every epoch, keeping the head with the best validation
  // accuracy and stopping after `patience` epochs without improvement; with
  // transfer.refit, a head trained on every sample for the chosen epochs.
  void TrainHead(StageNetwork& net, const std::vector<float>& pooled,
                 const std::vector<int64_t>& labels, int64_t width, SchemeRun* run) {
    const uint64_t id = SchemeIds().at("FbFTL");
    const size_t m = net.num_stages();
    const at::Tensor test_z = Features(net, cut_, test_.x);
    SeedTorch(o_.seed, id);
    net.Reinitialize(cut_, m);
    const auto n = static_cast<int64_t>(labels.size());
    if (n == 0) {
      run->accuracy = Accuracy(net, cut_, test_z, test_.y);
      return;
    }
    const at::Tensor z = torch::from_blob(const_cast<float*>(pooled.data()), {n, width}).clone();
    const at::Tensor y = torch::from_blob(const_cast<int64_t*>(labels.data()), {n},
                                          torch::kInt64).clone();
    Rng split_rng = MakeRng(o_.seed, Stream::kReferenceSplit, {id});
    const std::vector<int64_t> perm = Permutation(split_rng, n);
    const auto n_val = static_cast<int64_t>(std::floor(o_.validation_share * static_cast<double>(n)));
    const at::Tensor index = torch::tensor(perm);
    const at::Tensor val_z = z.index_select(0, index.slice(0, 0, n_val));
    const at::Tensor val_y = y.index_select(0, index.slice(0, 0, n_val));
    const at::Tensor train_z = z.index_select(0, index.slice(0, n_val, n));
    const at::Tensor train_y = y.index_select(0, index.slice(0, n_val, n));
    const std::vector<at::Tensor> head = net.Parameters(cut_, m);
    torch::optim::SGD optimizer = MakeSgd(head, o_.lr, o_.momentum, o_.weight_decay);
    std::vector<at::Tensor> best;
    double best_val = -1;
    int best_epoch = 0, since_best = 0;
    for (int epoch = 1; epoch <= o_.head_epochs && since_best < o_.patience; ++epoch) {
      HeadEpoch(net, optimizer, train_z, train_y, epoch);
      // Without a validation split, the last head is the one kept.
      const double val = n_val > 0 ? Accuracy(net, cut_, val_z, val_y) : epoch;
      if (val > best_val) {
        best_val = val;
        best_epoch = epoch;
        since_best = 0;
        best.clear();
        for (const at::Tensor& p : head) best.push_back(p.detach().clone());
      } else {
        ++since_best;
      }
      run->curve.push_back({epoch, run->uplink_bytes, Accuracy(net, cut_, test_z, test_.y)});
    }
    if (o_.refit && n_val > 0) {
      // The validation split chose the epoch count; train a fresh head that
      // long on every sample. The curve is that head's.
      SeedTorch(o_.seed, id);
      net.Reinitialize(cut_, m);
      torch::optim::SGD refit = MakeSgd(head, o_.lr, o_.momentum, o_.weight_decay);
      run->curve.clear();
      for (int epoch = 1; epoch <= best_epoch; ++epoch) {
        HeadEpoch(net, refit, z, y, epoch);
        run->curve.push_back({epoch, run->uplink_bytes, Accuracy(net, cut_, test_z, test_.y)});
      }
    } else {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < head.size(); ++i) head[i].copy_(best[i]);
    }
    run->accuracy = Accuracy(net, cut_, test_z, test_.y);
  }

  // One epoch of the head's SGD on minibatches of (z, y), in the order the
  // seed and `epoch` give.
  void HeadEpoch(StageNetwork& net, torch::optim::SGD& optimizer, const at::Tensor& z,
                 const at::Tensor& y, int epoch) {
    const uint64_t id = SchemeIds().at("FbFTL");
    const size_t m = net.num_stages();
    Rng shuffle = MakeRng(o_.seed, Stream::kLocalTraining, {id, static_cast<uint64_t>(epoch)});
    const at::Tensor order = torch::tensor(Permutation(shuffle, z.size(0)));
    net.SetTraining(true);
    for (int64_t i = 0; i < order.size(0); i += o_.batch_size) {
      const at::Tensor b = order.slice(0, i, std::min<int64_t>(order.size(0), i + o_.batch_size));
      optimizer.zero_grad();
      torch::nn::functional::cross_entropy(net.Forward(z.index_select(0, b), cut_, m),
                                           y.index_select(0, b))
          .backward();
      optimizer.step();
    }
  }

  const Options& o_;
  const StageNetwork& source_;
  std::vector<ClientData> clients_;
  const Dataset& test_;
  std::vector<LayerCount> layers_;
  size_t cut_;
};

}  // namespace

std::vector<SchemeRun> RunTransferSchemes(const Config& config, const StageNetwork& source,
                                          const Dataset& train, const Dataset& test) {
  const Options o = ReadOptions(config);
  std::vector<std::string> schemes = SplitList(config.GetString("transfer.schemes"));
  for (const std::string& s : schemes) {
    if (SchemeIds().count(s) == 0) {
      throw Error("transfer.schemes: unknown scheme '" + s + "'; expected FL, FTL_f, FTL_c, SFL or FbFTL");
    }
  }
  if (train.is_regression() || !train.is_image()) {
    throw Error("transfer: needs an image classification data set, got " + train.name);
  }
  auto net = source.Clone();
  size_t cut = 0;
  try {
    cut = net->StageIndex(o.cut);
  } catch (const Error& e) {
    throw Error(std::string("transfer.cut: ") + e.what());
  }
  if (cut == 0) throw Error("transfer.cut: '" + o.cut + "' is the first stage; the extractor would be empty");
  const std::vector<int64_t> input_shape(train.x.sizes().begin() + 1, train.x.sizes().end());
  std::vector<LayerCount> layers;
  try {
    layers = net->Describe(input_shape);
  } catch (const c10::Error& e) {
    std::string shape;
    for (int64_t d : input_shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    throw Error("transfer.source_model: does not accept " + train.name + " samples of shape " +
                shape);
  }
  {
    torch::NoGradGuard no_grad;
    net->SetTraining(false);
    const at::Tensor out = net->Forward(train.x.slice(0, 0, 1));
    if (out.dim() != 2 || out.size(1) != train.num_classes) {
      throw Error("transfer.source_model: outputs " + std::to_string(out.numel()) +
                  " values per sample; " + train.name + " has " +
                  std::to_string(train.num_classes) + " classes");
    }
  }
  const int64_t needed = o.clients * o.samples_per_client;
  if (needed > train.size()) {
    throw Error("transfer: " + std::to_string(o.clients) + " clients x " +
                std::to_string(o.samples_per_client) + " samples need " + std::to_string(needed) +
                ", the training set has " + std::to_string(train.size()));
  }
  // Clients' samples: a seeded draw from the training set, K_u each; with
  // transfer.sample_share < 1 each sample stays with that probability.
  Rng pick = MakeRng(o.seed, Stream::kPartition, {});
  const std::vector<int64_t> perm = Permutation(pick, train.size());
  Rng keep = MakeRng(o.seed, Stream::kPartition, {1});
  std::vector<ClientData> clients(static_cast<size_t>(o.clients));
  for (int64_t u = 0; u < o.clients; ++u) {
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < o.samples_per_client; ++k) {
      const int64_t row = perm[static_cast<size_t>(u * o.samples_per_client + k)];
      if (o.sample_share >= 1 || Uniform01(keep) < o.sample_share) rows.push_back(row);
    }
    if (rows.empty()) continue;
    const at::Tensor index = torch::tensor(rows);
    clients[static_cast<size_t>(u)] = {train.x.index_select(0, index), train.y.index_select(0, index)};
  }
  PayloadSetup setup;
  setup.clients = o.clients;
  setup.samples_per_client = o.samples_per_client;
  setup.fraction = static_cast<double>(o.per_iteration) / static_cast<double>(o.clients);
  setup.epochs_fl = setup.epochs_ftl_f = setup.epochs_ftl_c = o.epochs;
  const std::vector<SchemePayload> closed = ClosedFormPayloads(layers, o.cut, setup);

  Runner runner(o, source, std::move(clients), test, layers, cut);
  std::vector<SchemeRun> runs;
  for (const std::string& scheme : schemes) {
    std::printf("-- %s\n", scheme.c_str());
    std::fflush(stdout);
    SchemeRun run = runner.Run(scheme);
    for (const SchemePayload& p : closed) {
      if (p.scheme == scheme) run.closed_form = p;
    }
    std::printf("   accuracy %.4f, uplink %s bytes\n", run.accuracy,
                FormatDouble(static_cast<double>(run.uplink_bytes), "%.4g").c_str());
    runs.push_back(std::move(run));
  }
  return runs;
}

namespace {

// The accuracy every scheme's uplink is measured to: the lower of FTL_c's
// and FbFTL's final accuracies (the level both reach; the paper's claim is
// that FbFTL matches FTL_c), or whichever of them ran.
double ReferenceAccuracy(const std::vector<SchemeRun>& runs) {
  double target = -1;
  for (const SchemeRun& r : runs) {
    if (r.scheme == "FTL_c" || r.scheme == "FbFTL") {
      target = target < 0 ? r.accuracy : std::min(target, r.accuracy);
    }
  }
  return target;
}

// Uplink bytes when the run first reached `target`; -1 if it never did.
int64_t UplinkToReach(const SchemeRun& run, double target) {
  if (target < 0) return -1;
  if (run.scheme == "FbFTL") return run.accuracy >= target ? run.uplink_bytes : -1;
  for (const CurvePoint& p : run.curve) {
    if (p.test_accuracy >= target) return p.uplink_bytes;
  }
  return -1;
}

std::string Sci(double v) { return FormatDouble(v, "%.4g"); }

// FbFTL's uplink bytes, the denominator of every ratio; 0 when FbFTL did not run.
int64_t FbftlUplink(const std::vector<SchemeRun>& runs) {
  for (const SchemeRun& r : runs) {
    if (r.scheme == "FbFTL") return r.uplink_bytes;
  }
  return 0;
}

std::string Ratio(double bytes, int64_t fbftl) {
  return fbftl > 0 ? Sci(bytes / static_cast<double>(fbftl)) : "—";
}

}  // namespace

std::string SchemesMarkdown(const std::vector<SchemeRun>& runs) {
  const double target = ReferenceAccuracy(runs);
  const int64_t fbftl = FbftlUplink(runs);
  std::string out =
      "| scheme | upload batches | values / batch | uplink bytes | uplink, Eqs. 2-6 (bytes) | "
      "downlink bytes | downlink, Eqs. 10-13 (bytes) | client compute X | accuracy | epsilon | "
      "uplink ÷ FbFTL's | uplink to reach " +
      (target >= 0 ? FormatDouble(target, "%.4f") : std::string("(no FTL_c or FbFTL run)")) +
      " (bytes) | ÷ FbFTL's |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SchemeRun& r : runs) {
    const int64_t reach = UplinkToReach(r, target);
    const auto uplink = static_cast<double>(r.uplink_bytes);
    // A run that never reached the target needed more than it sent.
    const bool never = reach < 0 && target >= 0;
    const std::string reach_text = reach >= 0 ? Sci(static_cast<double>(reach))
                                   : never    ? "> " + Sci(uplink)
                                              : "—";
    const std::string reach_ratio = reach >= 0 ? Ratio(static_cast<double>(reach), fbftl)
                                    : never && fbftl > 0 ? "> " + Ratio(uplink, fbftl)
                                                         : "—";
    out += "| " + r.scheme + " | " + std::to_string(r.upload_batches) + " | " +
           Sci(r.closed_form.params_per_batch) + " | " + Sci(uplink) + " | " +
           Sci(r.closed_form.uplink_bits / 8) + " | " +
           Sci(static_cast<double>(r.downlink_bytes)) + " | " +
           Sci(r.closed_form.downlink_bits / 8) + " | " + Sci(r.client_macs) + " | " +
           FormatDouble(r.accuracy, "%.4f") + " | " +
           (r.epsilon > 0 ? FormatDouble(r.epsilon, "%.3g") : "—") + " | " +
           Ratio(uplink, fbftl) + " | " + reach_text + " | " + reach_ratio + " |\n";
  }
  return out;
}

std::string SchemesCsv(const std::vector<SchemeRun>& runs) {
  const double target = ReferenceAccuracy(runs);
  std::string out =
      "scheme,upload_batches,transmissions,lost_uploads,rejected_uploads,uplink_bytes,"
      "uplink_value_bits,closed_form_uplink_bits,downlink_bytes,downlink_value_bits,"
      "closed_form_downlink_bits,client_macs,closed_form_client_macs,accuracy,epsilon,"
      "uplink_bytes_to_reference_accuracy,reference_accuracy\n";
  for (const SchemeRun& r : runs) {
    out += r.scheme + "," + std::to_string(r.upload_batches) + "," +
           std::to_string(r.transmissions) + "," + std::to_string(r.lost_uploads) + "," +
           std::to_string(r.rejected_uploads) + "," + std::to_string(r.uplink_bytes) + "," +
           std::to_string(r.uplink_value_bits) + "," +
           FormatDouble(r.closed_form.uplink_bits, "%.17g") + "," +
           std::to_string(r.downlink_bytes) + "," + std::to_string(r.downlink_value_bits) + "," +
           FormatDouble(r.closed_form.downlink_bits, "%.17g") + "," +
           FormatDouble(r.client_macs, "%.17g") + "," +
           FormatDouble(r.closed_form.client_macs, "%.17g") + "," +
           FormatDouble(r.accuracy, "%.6f") + "," + FormatDouble(r.epsilon, "%.6g") + "," +
           std::to_string(UplinkToReach(r, target)) + "," + FormatDouble(target, "%.6f") + "\n";
  }
  return out;
}

std::string CurvesCsv(const std::vector<SchemeRun>& runs) {
  std::string out = "scheme,epoch,uplink_bytes,test_accuracy\n";
  for (const SchemeRun& r : runs) {
    for (const CurvePoint& p : r.curve) {
      out += r.scheme + "," + std::to_string(p.epoch) + "," + std::to_string(p.uplink_bytes) +
             "," + FormatDouble(p.test_accuracy, "%.6f") + "\n";
    }
  }
  return out;
}

double Pretrain(const Config& config, StageNetwork& network, const Dataset& data,
                const Dataset& test) {
  const uint64_t seed = static_cast<uint64_t>(config.GetInt("seed"));
  const int epochs = static_cast<int>(config.GetInt("pretrain.epochs"));
  const int64_t batch = config.GetInt("pretrain.batch_size");
  const std::vector<at::Tensor> params = network.Parameters(0, network.num_stages());
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(config.GetDouble("pretrain.lr"))
                                          .momentum(0.9));
  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    Rng shuffle = MakeRng(seed, Stream::kLocalTraining, {0, static_cast<uint64_t>(epoch)});
    const at::Tensor order = torch::tensor(Permutation(shuffle, data.size()));
    network.SetTraining(true);
    double loss_sum = 0;
    for (int64_t i = 0; i < data.size(); i += batch) {
      const at::Tensor b = order.slice(0, i, std::min<int64_t>(data.size(), i + batch));
      optimizer.zero_grad();
      const at::Tensor loss = torch::nn::functional::cross_entropy(
          network.Forward(data.x.index_select(0, b)), data.y.index_select(0, b));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * static_cast<double>(b.size(0));
    }
    accuracy = Accuracy(network, 0, test.x, test.y);
    std::printf("epoch %d/%d  loss %.4f  test accuracy %.4f\n", epoch, epochs,
                loss_sum / static_cast<double>(data.size()), accuracy);
    std::fflush(stdout);
  }
  return accuracy;
}

}  // namespace fedprof
