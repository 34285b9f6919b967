#include "fedprof/fbftl/schemes.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"
#include "fedprof/fbftl/options.h"
#include "fedprof/fbftl/scheme_runner.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {

std::vector<SchemeRun> RunTransferSchemes(const RunOptions::Transfer& o, uint64_t seed,
                                          const StagedModel& source, const Dataset& train,
                                          const Dataset& test) {
  const std::vector<std::string> schemes = TransferSchemes(o);
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
  if (cut == 0) {
    throw Error("transfer.cut: '" + o.cut + "' is the first stage; the extractor would be empty");
  }
  const std::vector<int64_t> input_shape(train.x.sizes().begin() + 1, train.x.sizes().end());
  std::vector<LayerCount> layers;
  try {
    layers = CountStageLayers(*net, input_shape);
  } catch (const c10::Error& e) {
    std::string shape;
    for (int64_t d : input_shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    throw Error("transfer.source_model: does not accept " + train.name + " samples of shape " +
                shape);
  }
  {
    torch::NoGradGuard no_grad;
    net->train(false);
    const at::Tensor out = net->ForwardStages(train.x.slice(0, 0, 1), 0, net->num_stages());
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
  Rng pick = MakeRng(seed, Stream::kPartition, {});
  const std::vector<int64_t> perm = Permutation(pick, train.size());
  Rng keep = MakeRng(seed, Stream::kPartition, {1});
  std::vector<ClientData> clients(static_cast<size_t>(o.clients));
  for (int64_t u = 0; u < o.clients; ++u) {
    std::vector<int64_t> rows;
    for (int64_t k = 0; k < o.samples_per_client; ++k) {
      const int64_t row = perm[static_cast<size_t>(u * o.samples_per_client + k)];
      if (o.sample_share >= 1 || Uniform01(keep) < o.sample_share) rows.push_back(row);
    }
    if (rows.empty()) continue;
    const at::Tensor index = torch::tensor(rows);
    clients[static_cast<size_t>(u)] = {train.x.index_select(0, index),
                                       train.y.index_select(0, index)};
  }
  // Derived once for every scheme: U C as a whole number of clients, the
  // uplink's codec in compression.h's terms and a packet's loss rate.
  const int64_t per_iteration =
      std::max<int64_t>(1, std::llround(static_cast<double>(o.clients) * o.fraction));
  Compression compression;
  compression.keep_ratio = o.keep_ratio;
  compression.bits = static_cast<int>(o.bits);
  compression.quantizer = o.quantizer == "symmetric" ? Quantizer::kSymmetric : Quantizer::kMinMax;
  const double packet_loss = PacketLossRate(o.block_loss, static_cast<int>(o.blocks_per_packet));

  PayloadSetup payload;
  payload.clients = o.clients;
  payload.samples_per_client = o.samples_per_client;
  payload.fraction = static_cast<double>(per_iteration) / static_cast<double>(o.clients);
  payload.epochs_fl = payload.epochs_ftl_f = payload.epochs_ftl_c = static_cast<double>(o.epochs);
  const std::vector<SchemePayload> closed = ClosedFormPayloads(layers, o.cut, payload);

  const SchemeSetup setup{o, seed, per_iteration, compression, packet_loss,
                          source, std::move(clients), test, layers, cut};
  std::vector<SchemeRun> runs;
  for (const std::string& scheme : schemes) {
    std::printf("-- %s\n", scheme.c_str());
    std::fflush(stdout);
    SchemeRun run;
    run.scheme = scheme;
    if (scheme == "FbFTL") {
      RunFbftlScheme(setup, &run);
    } else if (scheme == "SFL") {
      RunSflScheme(setup, &run);
    } else {
      RunGradientScheme(setup, scheme, &run);
    }
    for (const SchemePayload& p : closed) {
      if (p.scheme == scheme) run.closed_form = p;
    }
    std::printf("   accuracy %.4f, uplink %s bytes\n", run.accuracy,
                FormatDouble(static_cast<double>(run.uplink_bytes), "%.4g").c_str());
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace fedprof
