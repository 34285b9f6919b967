#ifndef FEDPROF_FBFTL_SCHEME_RUNNER_H_
#define FEDPROF_FBFTL_SCHEME_RUNNER_H_

// What the transfer schemes share: their setup and the tensor plumbing of
// their clients and server. Internal to fbftl/; schemes.h is the interface.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/data/dataset.h"
#include "fedprof/fbftl/compression.h"
#include "fedprof/fbftl/options.h"
#include "fedprof/fbftl/payload.h"
#include "fedprof/fbftl/schemes.h"

namespace torch::optim {
class SGD;
}

namespace fedprof {

class StagedModel;

// One client's samples (empty when it kept none).
struct ClientData {
  at::Tensor x, y;
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
};

// A run's setup, shared read-only by every scheme it runs: the transfer.*
// options as set, the run's seed, and what RunTransferSchemes derives once
// from them and from the source and data.
struct SchemeSetup {
  const RunOptions::Transfer& options;
  uint64_t seed = 1;
  int64_t per_iteration = 1;  // U C: transfer.clients x transfer.fraction, rounded, at least 1
  Compression compression;    // of every upload (keep_ratio, bits, quantizer)
  double packet_loss = 0;     // PLR of a packet (Eq. 18: block_loss, blocks_per_packet)
  const StagedModel& source;        // never modified: every scheme trains a clone
  std::vector<ClientData> clients;  // U of them
  const Dataset& test;
  std::vector<LayerCount> layers;  // the source's stages, as the paper counts them
  size_t cut = 0;                  // index of the cut stage m_c
};

// FL, FTL_f, FTL_c (gradient_schemes.cc).
void RunGradientScheme(const SchemeSetup& setup, const std::string& scheme, SchemeRun* run);
// SFL (gradient_schemes.cc).
void RunSflScheme(const SchemeSetup& setup, SchemeRun* run);
// FbFTL (fbftl_scheme.cc).
void RunFbftlScheme(const SchemeSetup& setup, SchemeRun* run);

// Calls iterate(iteration, clients) for every iteration of transfer.epochs
// epochs (each epoch a seeded permutation of the clients, U·C at a time,
// those without samples left out) and records the curve with `accuracy`
// after each epoch; the run's accuracy is the last point's.
void ForEachIteration(const SchemeSetup& setup, uint64_t scheme_id, SchemeRun* run,
                      const std::function<void(int64_t, const std::vector<size_t>&)>& iterate,
                      const std::function<double()>& accuracy);

// Seeds torch's generator for a scheme's fresh parameters.
void SeedTorch(uint64_t seed, uint64_t scheme_id);

// Test accuracy of stages [from, end) on x (already through stages before
// `from`), in evaluation mode.
double Accuracy(StagedModel& model, size_t from, const at::Tensor& x, const at::Tensor& y);
// The extractor's output f¹(x), stages [0, cut), flattened per sample.
at::Tensor Features(StagedModel& model, size_t cut, const at::Tensor& x);

// A tensor's values as float32, row-major.
std::vector<float> ToVector(const at::Tensor& t);
// The tensors' values (or, with `grads`, their gradients, zero where none)
// concatenated.
std::vector<float> Concat(const std::vector<at::Tensor>& tensors, bool grads);
int64_t Numel(const std::vector<at::Tensor>& tensors);
bool AllFinite(const std::vector<float>& values);
// Multiplications per sample of stages [from, to).
double MacsOf(const std::vector<LayerCount>& layers, size_t from, size_t to);
// SGD with the transfer options' learning rate, momentum and weight decay.
torch::optim::SGD MakeSgd(const std::vector<at::Tensor>& params, const RunOptions::Transfer& options);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_SCHEME_RUNNER_H_
