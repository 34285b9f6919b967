// FbFTL (the FbFTL paper's Alg. 1): the extractor goes down once; each client
// uploads (z, y) once per sample; the server trains the head on the pooled
// features.
#include <torch/torch.h>

#include <cmath>
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

// The server's side of one feature upload: a sample's (z, y) joins the pool
// unless it is malformed (a line saying why, counted as rejected).
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

// One epoch of the head's SGD on minibatches of (z, y), in the order the
// seed and `epoch` give.
void HeadEpoch(const SchemeSetup& setup, StagedModel& net, torch::optim::SGD& optimizer,
               const at::Tensor& z, const at::Tensor& y, int epoch) {
  const RunOptions::Transfer& o = setup.options;
  const size_t m = net.num_stages();
  Rng shuffle =
      MakeRng(setup.seed, Stream::kLocalTraining, {SchemeId("FbFTL"), static_cast<uint64_t>(epoch)});
  const at::Tensor order = torch::tensor(Permutation(shuffle, z.size(0)));
  net.train(true);
  for (int64_t i = 0; i < order.size(0); i += o.batch_size) {
    const at::Tensor b = order.slice(0, i, std::min<int64_t>(order.size(0), i + o.batch_size));
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(net.ForwardStages(z.index_select(0, b), setup.cut, m),
                                         y.index_select(0, b))
        .backward();
    optimizer.step();
  }
}

// The server's head training: SGD on minibatches of the pooled (z, y),
// reshuffled every epoch, keeping the head with the best validation
// accuracy and stopping after `patience` epochs without improvement; with
// transfer.refit, a head trained on every sample for the chosen epochs.
void TrainHead(const SchemeSetup& setup, StagedModel& net, const std::vector<float>& pooled,
               const std::vector<int64_t>& labels, int64_t width, SchemeRun* run) {
  const RunOptions::Transfer& o = setup.options;
  const uint64_t id = SchemeId("FbFTL");
  const size_t cut = setup.cut;
  const size_t m = net.num_stages();
  const at::Tensor test_z = Features(net, cut, setup.test.x);
  const at::Tensor& test_y = setup.test.y;
  SeedTorch(setup.seed, id);
  net.Reinitialize(cut, m);
  const auto n = static_cast<int64_t>(labels.size());
  if (n == 0) {
    run->accuracy = Accuracy(net, cut, test_z, test_y);
    return;
  }
  const at::Tensor z = torch::from_blob(const_cast<float*>(pooled.data()), {n, width}).clone();
  const at::Tensor y =
      torch::from_blob(const_cast<int64_t*>(labels.data()), {n}, torch::kInt64).clone();
  Rng split_rng = MakeRng(setup.seed, Stream::kReferenceSplit, {id});
  const std::vector<int64_t> perm = Permutation(split_rng, n);
  const auto n_val = static_cast<int64_t>(std::floor(o.validation_share * static_cast<double>(n)));
  const at::Tensor index = torch::tensor(perm);
  const at::Tensor val_z = z.index_select(0, index.slice(0, 0, n_val));
  const at::Tensor val_y = y.index_select(0, index.slice(0, 0, n_val));
  const at::Tensor train_z = z.index_select(0, index.slice(0, n_val, n));
  const at::Tensor train_y = y.index_select(0, index.slice(0, n_val, n));
  const std::vector<at::Tensor> head = net.StageParameters(cut, m);
  torch::optim::SGD optimizer = MakeSgd(head, o);
  std::vector<at::Tensor> best;
  double best_val = -1;
  int best_epoch = 0, since_best = 0;
  for (int epoch = 1; epoch <= o.head_epochs && since_best < o.patience; ++epoch) {
    HeadEpoch(setup, net, optimizer, train_z, train_y, epoch);
    // Without a validation split, the last head is the one kept.
    const double val = n_val > 0 ? Accuracy(net, cut, val_z, val_y) : epoch;
    if (val > best_val) {
      best_val = val;
      best_epoch = epoch;
      since_best = 0;
      best.clear();
      for (const at::Tensor& p : head) best.push_back(p.detach().clone());
    } else {
      ++since_best;
    }
    run->curve.push_back({epoch, run->uplink_bytes, Accuracy(net, cut, test_z, test_y)});
  }
  if (o.refit && n_val > 0) {
    // The validation split chose the epoch count; train a fresh head that
    // long on every sample. The curve is that head's.
    SeedTorch(setup.seed, id);
    net.Reinitialize(cut, m);
    torch::optim::SGD refit = MakeSgd(head, o);
    run->curve.clear();
    for (int epoch = 1; epoch <= best_epoch; ++epoch) {
      HeadEpoch(setup, net, refit, z, y, epoch);
      run->curve.push_back({epoch, run->uplink_bytes, Accuracy(net, cut, test_z, test_y)});
    }
  } else {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < head.size(); ++i) head[i].copy_(best[i]);
  }
  run->accuracy = Accuracy(net, cut, test_z, test_y);
}

}  // namespace

void RunFbftlScheme(const SchemeSetup& setup, SchemeRun* run) {
  const RunOptions::Transfer& o = setup.options;
  const uint64_t id = SchemeId("FbFTL");
  const size_t cut = setup.cut;
  auto net = setup.source.Clone();
  wire::Download extractor;
  EncodeValues(Concat(net->StageParameters(0, cut), false), Compression{},
               extractor.mutable_values());
  CountDownload(extractor, run);
  Uplink uplink(setup, id);
  const bool paper_form = o.dp_form == "paper";
  std::vector<float> pooled;
  std::vector<int64_t> labels;
  int64_t width = 0;
  const int64_t classes = setup.test.num_classes;
  for (size_t u = 0; u < setup.clients.size(); ++u) {
    const ClientData& data = setup.clients[u];
    if (data.size() == 0) continue;
    const at::Tensor z = Features(*net, cut, data.x);
    width = z.size(1);
    run->client_macs += static_cast<double>(data.size()) * MacsOf(setup.layers, 0, cut);
    Rng noise = MakeRng(setup.seed, Stream::kPrivacy, {id, 0, static_cast<uint64_t>(u)});
    // The paper's form scales the noise by the client's largest difference
    // between two samples' features, divided by K (Section V-B).
    double spread = 0;
    if (o.dp_noise > 0 && paper_form) {
      spread = (std::get<0>(z.max(0)) - std::get<0>(z.min(0))).max().item<double>() /
               static_cast<double>(data.size());
    }
    std::vector<std::string> packet;
    int64_t packet_bytes = 0, packet_bits = 0;
    auto flush = [&] {
      if (packet.empty()) return;
      if (uplink.Send(packet_bytes, packet_bits, run)) {
        for (const std::string& bytes : packet) {
          ReceiveFeatures(bytes, width, classes, &pooled, &labels, run);
        }
      }
      packet.clear();
      packet_bytes = packet_bits = 0;
    };
    for (int64_t k = 0; k < data.size(); ++k) {
      std::vector<float> features = ToVector(z[k]);
      if (o.dp_noise > 0) {
        if (paper_form) {
          AddGaussianNoise(features, o.dp_noise * spread, noise);
        } else {
          AddClippedGaussianNoise(features, o.dp_clip, o.dp_noise, noise);
        }
      }
      wire::FeatureUpload up;
      up.set_client(static_cast<uint32_t>(u));
      up.set_label(static_cast<uint32_t>(data.y[k].item<int64_t>()));
      EncodeValues(features, setup.compression, up.mutable_features());
      ++run->upload_batches;
      packet.push_back(up.SerializeAsString());
      packet_bytes += static_cast<int64_t>(packet.back().size());
      packet_bits += WireValueBits(up.features());
      if (static_cast<int64_t>(packet.size()) == o.blocks_per_packet) flush();
    }
    flush();
  }
  TrainHead(setup, *net, pooled, labels, width, run);
  if (o.dp_noise > 0) {
    run->epsilon = SampledGaussianEpsilon(1.0, o.dp_noise, 1, o.dp_delta).epsilon;
  }
}

}  // namespace fedprof
