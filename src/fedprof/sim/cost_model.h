#ifndef FEDPROF_SIM_COST_MODEL_H_
#define FEDPROF_SIM_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "fedprof/config/run_options.h"

namespace fedprof {

// The time/energy cost model of the FedProf papers (Eqs. 27-34), on the
// cost.* options (RunOptions::Cost). Units: speed in GHz, bandwidth in MHz,
// SNR in dB (converted to linear), sizes in bits, times in seconds, energy
// in joules, powers in W (P_f at 1 GHz). Shannon capacity uses log base 2:
// a link of bw MHz carries bw * 1e6 * log2(1 + SNR) bits/s.

struct ClientSpec {
  double speed_ghz = 1;      // s_k
  double bandwidth_mhz = 1;  // bw_k (downlink; uplink is half of it)
};

// s_k ~ Normal(speed_mean, speed_sd^2), bw_k ~ Normal(bandwidth_mean,
// bandwidth_sd^2), seeded. A draw below 10% of its mean is raised to 10% of
// the mean: the normal model allows non-positive speeds, devices do not.
std::vector<ClientSpec> DrawClientSpecs(int num_clients, const RunOptions::Cost& options,
                                        uint64_t seed);

// One client's costs for one round.
struct ClientCost {
  double comm_s = 0;     // T_comm, Eq. 29: model download + upload
  double train_s = 0;    // T_train, Eq. 30
  double rp_gen_s = 0;   // T_RPgen, Eq. 31: one epoch's worth of compute (+ HE work)
  double rp_up_s = 0;    // T_RPup, Eq. 31: profile (or ciphertext) upload
  double rp_down_s = 0;  // secure matching: the encrypted reference's download
  double secagg_s = 0;   // secure aggregation: the session's messages and masks
  double energy_j = 0;   // E_k, Eqs. 28, 32-34
  double total_s() const { return comm_s + train_s + rp_gen_s + rp_up_s + rp_down_s + secagg_s; }
};

// What profiling adds to a client's round (Eq. 31): a forward pass over the
// local data and the upload of `upload_bits` (the profile, 8q bytes). Secure
// matching (App. C.2) uploads one ciphertext instead, and adds the download
// of the public key and encrypted reference and the client's homomorphic
// work (`extra_cycles`).
struct ProfilingLoad {
  double upload_bits = 0;
  double download_bits = 0;
  double extra_cycles = 0;
};

// The ProfilingLoad of plain matching of q units, and of secure matching
// with a Paillier key of `key_bits` (ciphertexts of 2·key_bits bits).
// Cycles per unit of the client's work: `cycles_per_unit`, or when 0 the
// figures measured with bench/paillier_bench on a 2.6 GHz x86-64 core:
// 4.8e6 (2048-bit keys), 1.0e7 (3072-bit).
// What a secure aggregation session adds to a client's round: its messages
// up the half-bandwidth uplink and down, and the work of its masks.
struct SessionLoad {
  double upload_bits = 0;
  double download_bits = 0;
  double cycles = 0;
};

// What a client algorithm adds to a client's traffic, priced as the model's
// own transfer is (Eq. 29): the values its server half sends beside θ
// (SCAFFOLD's c) down, and those its client half sends beside the model
// (Δc_i) up the half-bandwidth uplink.
struct AlgorithmLoad {
  double download_bits = 0;
  double upload_bits = 0;
};

ProfilingLoad PlainProfiling(int64_t units);
ProfilingLoad SecureProfiling(int64_t units, int key_bits, double cycles_per_unit = 0);

class CostModel {
 public:
  // bits_per_sample: BPS, cost.bits_per_sample or, when that is 0, a
  // figure of the data's (run/simulation.cc); model_bits: msize, the
  // model's size on the wire.
  CostModel(const RunOptions::Cost& options, double bits_per_sample, double model_bits);

  // `profiling` adds the profiling costs (T_RP, E_RP); `session` a secure
  // aggregation session's; `algorithm` a client algorithm's values to T_comm.
  ClientCost Cost(const ClientSpec& spec, int64_t num_samples, int epochs,
                  const ProfilingLoad* profiling = nullptr, const SessionLoad* session = nullptr,
                  const AlgorithmLoad* algorithm = nullptr) const;

  // Bits per second of the downlink of a client with this bandwidth.
  double DownlinkBitsPerSecond(const ClientSpec& spec) const;

 private:
  RunOptions::Cost options_;
  double bits_per_sample_;
  double model_bits_;
  double spectral_efficiency_;  // log2(1 + SNR_linear)
};

}  // namespace fedprof

#endif  // FEDPROF_SIM_COST_MODEL_H_
