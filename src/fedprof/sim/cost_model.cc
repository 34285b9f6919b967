#include "fedprof/sim/cost_model.h"

#include <algorithm>
#include <cmath>

#include "fedprof/core/rng.h"

namespace fedprof {

std::vector<ClientSpec> DrawClientSpecs(int num_clients, const RunOptions::Cost& options,
                                        uint64_t seed) {
  Rng rng = MakeRng(seed, Stream::kClientSpecs);
  std::vector<ClientSpec> specs(num_clients);
  for (auto& s : specs) {
    const double speed = options.speed_mean + options.speed_sd * StandardNormal(rng);
    const double bw = options.bandwidth_mean + options.bandwidth_sd * StandardNormal(rng);
    s.speed_ghz = std::max(speed, 0.1 * options.speed_mean);
    s.bandwidth_mhz = std::max(bw, 0.1 * options.bandwidth_mean);
  }
  return specs;
}

CostModel::CostModel(const RunOptions::Cost& options, double bits_per_sample, double model_bits)
    : options_(options),
      bits_per_sample_(bits_per_sample),
      model_bits_(model_bits),
      spectral_efficiency_(std::log2(1.0 + std::pow(10.0, options.snr_db / 10.0))) {}

double CostModel::DownlinkBitsPerSecond(const ClientSpec& spec) const {
  return spec.bandwidth_mhz * 1e6 * spectral_efficiency_;
}

ClientCost CostModel::Cost(const ClientSpec& spec, int64_t num_samples, int epochs,
                           const ProfilingLoad* profiling, const SessionLoad* session,
                           const AlgorithmLoad* algorithm) const {
  ClientCost c;
  const double down_bps = DownlinkBitsPerSecond(spec);
  const double hz = spec.speed_ghz * 1e9;
  // Eq. 29: upload takes twice the download (uplink = half the bandwidth).
  c.comm_s = 3.0 * model_bits_ / down_bps;
  if (algorithm != nullptr) {
    c.comm_s += algorithm->download_bits / down_bps + algorithm->upload_bits / (0.5 * down_bps);
  }
  // Eq. 30: cycles for E epochs over the local data.
  const double epoch_s =
      static_cast<double>(num_samples) * bits_per_sample_ * options_.cycles_per_bit / hz;
  c.train_s = epochs * epoch_s;
  if (profiling != nullptr) {
    // Eq. 31: a forward pass costs as much as one epoch; the profile goes up
    // the half-bandwidth uplink.
    c.rp_gen_s = epoch_s + profiling->extra_cycles / hz;
    c.rp_up_s = profiling->upload_bits / (0.5 * down_bps);
    c.rp_down_s = profiling->download_bits / down_bps;
  }
  // Eqs. 32-34: P_f s^3 with s in GHz, so P_f is the power at 1 GHz.
  const double compute_w = options_.p_f * spec.speed_ghz * spec.speed_ghz * spec.speed_ghz;
  c.energy_j = options_.p_trans * (c.comm_s + c.rp_up_s + c.rp_down_s) +
               compute_w * (c.train_s + c.rp_gen_s);
  if (session != nullptr) {
    // Priced as the model's own transfer and training are (Eqs. 29, 30, 32-34).
    const double transfer_s = session->upload_bits / (0.5 * down_bps) + session->download_bits / down_bps;
    const double work_s = session->cycles / hz;
    c.secagg_s = transfer_s + work_s;
    c.energy_j += options_.p_trans * transfer_s + compute_w * work_s;
  }
  return c;
}

ProfilingLoad PlainProfiling(int64_t units) {
  ProfilingLoad p;
  p.upload_bits = 64.0 * static_cast<double>(units);  // RPsize = 8q bytes
  return p;
}

ProfilingLoad SecureProfiling(int64_t units, int key_bits, double cycles_per_unit) {
  if (cycles_per_unit <= 0) cycles_per_unit = key_bits <= 2048 ? 4.8e6 : 1.0e7;
  const double ciphertext_bits = 2.0 * key_bits;
  ProfilingLoad p;
  p.upload_bits = ciphertext_bits;
  // The key (n) and 3q ciphertexts: Enc(w_i), Enc(w_i mu_V,i), Enc(c_i).
  p.download_bits = key_bits + 3.0 * static_cast<double>(units) * ciphertext_bits;
  p.extra_cycles = cycles_per_unit * static_cast<double>(units);
  return p;
}

}  // namespace fedprof
