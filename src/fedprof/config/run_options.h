#ifndef FEDPROF_CONFIG_RUN_OPTIONS_H_
#define FEDPROF_CONFIG_RUN_OPTIONS_H_

// Every option of a run as a typed field, one struct per section of the
// option table (config/options.cc). Each row of that table is bound to one
// field here: Config fills them once, validated, and the rooms of the code
// receive their section, never option names, and read it as it is. The
// values are as a user set them (no defaults here: the table holds them).
// Where a room needs another shape (a value that depends on the data, a
// merge of sections, another library's types) it is derived in one place,
// which says why. An option that may be left empty is a std::optional.
// Standard headers only: torch-free rooms include it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace fedprof {

struct RunOptions {
  struct Data {
    std::string name, dir, emnist_split, train_file, test_file, targets, task, memory_key;
    int64_t train_limit = 0, test_limit = 0;
    double holdout_share = 0;
  };
  struct Clients {
    int64_t count = 0;
  };
  struct Partition {
    std::string kind, sizes;
    double dominant_share = 0, size_mean = 0, size_sd = 0, beta = 0;
    int64_t min_size = 0, classes = 0, shards = 0;
  };
  struct Quality {
    double irrelevant = 0, blurred = 0, salt_pepper = 0, gaussian_noise = 0, polluted = 0;
    std::string irrelevant_source;
    double blur_sigma = 0, sp_density = 0, noise_sigma = 0, pollute_share = 0;
    double feature_skew = 0;
  };
  struct Model {
    std::string name, file, hidden, profile_layer;
    double width = 0;
  };
  struct Train {
    int64_t epochs = 0, batch_size = 0;
    double lr = 0, lr_decay = 0, momentum = 0, weight_decay = 0;
    std::optional<double> proximal_mu;
  };
  struct Strategy {
    std::string name, selector, aggregator, aggregation, algorithm;
    double fraction = 0;
  };
  struct FedProf {
    double alpha = 0;
    std::string sampling, reference, secure_matching;
    int64_t reference_client = 0, paillier_bits = 0, profile_group = 0;
  };
  struct FedProx {
    double mu = 0;
  };
  struct Scaffold {
    double server_lr = 0;
    bool correct = true;
  };
  struct FedDyn {
    double alpha = 0;
  };
  struct Moon {
    double mu = 0, tau = 0;
  };
  struct FedAdam {
    double server_lr = 0, beta1 = 0, beta2 = 0, tau = 0;
  };
  struct Clustered {
    int64_t sketch_dim = 0;
  };
  struct Afl {
    double drop_share = 0, temperature = 0, random_share = 0;
  };
  struct Availability {
    std::string kind, trace;
    double online_mean_s = 0, offline_mean_s = 0, overcommit = 1;
    double share = 0, amplitude = 0, time_zones_h = 0, slot_s = 0, day_s = 0;  // diurnal
    // Whether a simulation puts its clients behind AvailabilityTransport.
    bool simulated() const { return kind != "always" || overcommit > 1; }
  };
  struct Oort {
    double exploration = 0, exploration_decay = 0, exploration_min = 0, cut_off = 0, penalty = 0,
           duration_percentile = 0, pacer_step = 0, clip_quantile = 0;
    int64_t pacer_window = 0;
  };
  struct FedBuff {
    int64_t concurrency = 0, buffer = 0;
    double server_lr = 0, staleness_exponent = 0;
    std::string refill;
  };
  struct Robust {
    double trim_share = 0, max_update_norm = 0, cc_radius = 0, momentum = 0, flame_noise = 0, zeno_rho = 0;
    std::optional<int64_t> byzantine, root_epochs;
    int64_t multi_krum_select = 0, cc_iterations = 0, root_size = 0, bucket_size = 0, validation_size = 0;
    std::string norm_action, pre_aggregation, cc_start, fltrust_scale, fallback;
  };
  struct Attack {
    double share = 0, scale = 0, poison_share = 0;
    std::optional<double> z;
    int64_t target = 0;
    std::string kind, perturbation;
    // Whether the run has backdoor attackers, whose success it measures.
    bool backdoor() const { return kind == "backdoor" && share > 0; }
  };
  struct Cost {
    double speed_mean = 0, speed_sd = 0, bandwidth_mean = 0, bandwidth_sd = 0, snr_db = 0,
           bits_per_sample = 0, cycles_per_bit = 0, p_trans = 0, p_f = 0, he_cycles_per_unit = 0;
  };
  struct Pretrain {
    std::string architecture;
    int64_t epochs = 0, batch_size = 0;
    double lr = 0;
    bool on_holdout = false;
  };
  struct Transfer {
    std::string source_model, cut, schemes, quantizer, dp_form;
    int64_t clients = 0, samples_per_client = 0, epochs = 0, head_epochs = 0, patience = 0,
            batch_size = 0, bits = 0, blocks_per_packet = 0, retransmissions = 0;
    double fraction = 0, validation_share = 0, lr = 0, momentum = 0, weight_decay = 0,
           sample_share = 0, keep_ratio = 0, block_loss = 0, dp_noise = 0, dp_clip = 0,
           dp_delta = 0;
    bool refit = false;
  };
  struct Eval {
    int64_t every = 0, batch_size = 0, federated_every = 0;
    double federated_fraction = 0;
  };
  struct Report {
    double target = 0;
    bool progress = false;
    int64_t per_client_limit = 0;
  };
  struct ClientState {
    int64_t memory_mb = 0;
  };
  struct Deploy {
    int64_t min_clients = 0, min_results = 0, round_attempts = 0, chunk_kb = 0, max_samples = 0;
    int64_t max_clients = 0;
    double start_timeout_s = 0, round_timeout_s = 0, heartbeat_s = 0, heartbeat_timeout_s = 0;
  };
  struct Dist {
    double timeout_s = 0;
  };
  struct Dp {
    std::string mode, clipping, noise, key_dir;
    double noise_multiplier = 0, clip_norm = 0, target_quantile = 0, clip_lr = 0, count_noise = 0, delta = 0,
           target_epsilon = 0, max_inclusion = 0, rounding_beta = 0, client_budget = 0;
    int64_t bits = 0;
    bool clear_profiles = false, client_unbounded = false;
  };
  struct SecAgg {
    std::string protocol;
    int64_t neighbors = 0, threshold = 0, security_bits = 0, correctness_bits = 0, min_clients = 0, fleet = 0,
            client_reports = 0;
    double dropout = 0, corrupt = 0, drop_after_masking = 0, phase_timeout_s = 0;
    bool clear_profiles = false;
  };

  int64_t seed = 0, rounds = 0, threads = 0;
  // K = max(1, round(N C)), at most N: the clients a round asks for.
  int clients_per_round() const {
    const int64_t k = std::llround(static_cast<double>(clients.count) * strategy.fraction);
    return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(clients.count, k)));
  }
  Data data;
  Clients clients;
  Partition partition;
  Quality quality;
  Model model;
  Train train;
  Strategy strategy;
  FedProf fedprof;
  FedProx fedprox;
  Scaffold scaffold;
  FedDyn feddyn;
  Moon moon;
  ClientState client_state;
  FedAdam fedadam;
  Clustered clustered;
  Afl afl;
  Oort oort;
  FedBuff fedbuff;
  Availability availability;
  Robust robust;
  Attack attack;
  Cost cost;
  Pretrain pretrain;
  Transfer transfer;
  Eval eval;
  Report report;
  Deploy deploy;
  Dist dist;
  SecAgg secagg;
  Dp dp;
};

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_RUN_OPTIONS_H_
