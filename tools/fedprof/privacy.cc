// fedprof privacy: privacy analyses of uploads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/aggregation/dp_fedavg.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/privacy/label_leakage.h"
#include "fedprof/privacy/rdp.h"
#include "fedprof/strategy/strategy.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

// A run's DP options from its config (--config/--set).
RunOptions RunConfig(const std::string& config_path, const std::vector<std::string>& sets) {
  Config config = Config::Load(config_path, sets);
  const RunOptions& o = config.options();
  if (o.dp.mode == "off")
    throw Error("privacy dp: the run has dp.mode = off: it releases its models without noise");
  return o;
}

// The ledger of a run after `rounds` rounds, every round's session
// inviting K clients and its sum holding them all: ε against observers of
// the models (who do not know the sample), and against the server of a
// client in `participations` of the rounds (infinite under central DP).
struct Ledger {
  double observers = 0;
  double server = 0;
};
Ledger RunLedger(const DpFedAvgOptions& dp, int64_t model_values, int64_t rounds, int64_t participations) {
  if (!dp.distributed) return {DpEpsilon(dp, rounds), participations > 0 ? HUGE_VAL : 0.0};
  if (model_values < 1) {
    throw Error(
        "privacy dp: dp.mode = distributed: give --model-values, the run's model size (LeNet-5: "
        "61706), which sets the encoding");
  }
  const int64_t k = dp.expected_clients;
  if (dp.fewest_honest_in_sum && dp.fewest_honest_in_sum(k) < 1) {
    throw Error("privacy dp: no secure aggregation session of the " + std::to_string(k) +
                " clients a round expects can run with the colluders secagg.corrupt and secagg.fleet allow "
                "(fedprof simulate says which setting to change)");
  }
  const DdgRelease one = DdgRoundRelease(dp, dp.clip_norm, 1, static_cast<size_t>(model_values), k, k);
  Ledger l;
  l.observers =
      DdgEpsilon(std::vector<DdgRelease>(static_cast<size_t>(rounds), one), DpSampleRate(dp), DpDelta(dp))
          .epsilon;
  l.server = DdgEpsilonUnsampled(std::vector<DdgRelease>(static_cast<size_t>(participations), one), true,
                                 DpDelta(dp))
                 .epsilon;
  return l;
}

// The participations that 1 client in 100 exceeds over `rounds` rounds at
// sampling rate q: the 99th percentile of Binomial(rounds, q).
int64_t Participations99(int64_t rounds, double q) {
  double below = 0;
  for (int64_t m = 0; m <= rounds; ++m) {
    below += std::exp(std::lgamma(rounds + 1.0) - std::lgamma(m + 1.0) - std::lgamma(rounds - m + 1.0) +
                      (q > 0 ? m * std::log(q) : (m == 0 ? 0 : -HUGE_VAL)) +
                      (q < 1 ? (rounds - m) * std::log1p(-q) : (m == rounds ? 0 : -HUGE_VAL)));
    if (below >= 0.99) return m;
  }
  return rounds;
}

std::string Epsilon(double e) { return std::isinf(e) ? "inf" : FormatDouble(e, "%.6g"); }

// The ledger of a run's config, round by round (the rounds printed: the
// first, every tenth of the run, the last), and where dp.target_epsilon
// stops it: the numbers the run will write to metrics.csv (under
// distributed DP, if every round's sum holds K clients), against observers
// of the models and against the server of the client in the most rounds
// the sampling gives 1 client in 100.
void PrintRunLedger(const RunOptions& o, int64_t model_values) {
  const DpFedAvgOptions dp = DpOptionsFrom(o);
  RunLedger(dp, model_values, 1, 1);  // what it lacks, before a line is printed
  const double q = DpSampleRate(dp);
  std::printf(
      "dp.mode = %s: N = %lld clients, K = %lld expected a round (q = %g charged), noise multiplier %g, "
      "delta = %g, %lld rounds\n",
      o.dp.mode.c_str(), static_cast<long long>(dp.num_clients), static_cast<long long>(dp.expected_clients),
      q, dp.noise_multiplier, DpDelta(dp), static_cast<long long>(o.rounds));
  std::printf(
      "epsilon against observers of the models (who do not know the sample), and against the server "
      "(and the colluders secure aggregation allows) of a client in one round and in the rounds 1 "
      "client in 100 reaches\n");
  const int64_t every = std::max<int64_t>(1, o.rounds / 10);
  int64_t stop = 0;
  double stop_epsilon = 0;
  for (int64_t round = 1; round <= o.rounds; ++round) {
    const int64_t m = Participations99(round, q);
    const Ledger l = RunLedger(dp, model_values, round, m);
    if (dp.target_epsilon > 0 && l.observers > dp.target_epsilon) {
      stop = round;
      stop_epsilon = l.observers;
      break;
    }
    if (round == 1 || round % every == 0 || round == o.rounds) {
      std::printf("round %6lld  epsilon %s  against the server: %s in one round, %s in %lld\n",
                  static_cast<long long>(round), Epsilon(l.observers).c_str(),
                  Epsilon(RunLedger(dp, model_values, round, 1).server).c_str(), Epsilon(l.server).c_str(),
                  static_cast<long long>(m));
    }
  }
  if (stop > 0) {
    std::printf("dp.target_epsilon = %g stops the run after round %lld (round %lld would reach %.6g)\n",
                dp.target_epsilon, static_cast<long long>(stop - 1), static_cast<long long>(stop),
                stop_epsilon);
  }
}

// The smallest σ, to 4 decimals and rounded up, for which eps(σ) is at most
// `target`: ε falls as σ grows, so bisection, then up to the printed digits
// (the σ printed is the one that meets the target).
double NoiseMultiplierFor(double target, const std::function<double(double)>& eps) {
  if (!(target > 0)) throw Error("--epsilon: expected a value > 0");
  double lo = 0, hi = 1;
  while (eps(hi) > target) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6) throw Error("--epsilon: no noise multiplier up to 1e6 reaches it");
  }
  while (hi - lo > 1e-5) {
    const double mid = (lo + hi) / 2;
    (eps(mid) > target ? lo : hi) = mid;
  }
  double printed = std::ceil(hi * 1e4) / 1e4;
  while (eps(printed) > target) printed += 1e-4;  // in case ceil's rounding landed below hi
  return printed;
}

}  // namespace

Runner AddPrivacy(CLI::App& app) {
  struct Args {
    int classes = 10;
    int samples = 8;
    int64_t clients = 0;
    uint64_t seed = 1;
    std::string distribution;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* privacy = app.add_subcommand("privacy", "Privacy analyses of uploads");
  privacy->require_subcommand(1);
  CLI::App* label = privacy->add_subcommand(
      "label", "Label privacy leakage of K labels per client (FbFTL, Eqs. 23-36)");
  label->add_option("--classes", args->classes, "Number of classes N")->capture_default_str();
  label->add_option("--samples-per-client", args->samples, "Labels per client K")
      ->capture_default_str();
  label->add_option("--distribution", args->distribution,
                    "True label distribution p1,...,pN (default uniform)");
  label->add_option("--clients", args->clients,
                    "U: also the leakage once U shuffled batches are revealed");
  label->add_option("--seed", args->seed, "Seed of the U drawn batches")->capture_default_str();
  label->add_flag("--json", args->json, "Print the figures as JSON");

  struct DpArgs {
    double noise_multiplier = 1.0, sample_rate = 0.01, delta = 1e-6, epsilon = 0;
    int64_t steps = 1, model_values = 0;
    std::string config;
    std::vector<std::string> sets;
  };
  auto dp = std::make_shared<DpArgs>();
  CLI::App* dp_cmd = privacy->add_subcommand(
      "dp",
      "epsilon of clipped, noised releases by the Renyi-DP accountant: of a run's config "
      "(--config/--set, its dp.* options, round by round) or of --sample-rate and --steps");
  dp_cmd->add_option("--config", dp->config, "A run's config (TOML): its ledger, before it runs");
  dp_cmd->add_option("--set", dp->sets, "Override a config key: --set key=value (repeatable)");
  CLI::Option* noise =
      dp_cmd->add_option("--noise-multiplier", dp->noise_multiplier, "sigma (noise sd / clip norm)");
  CLI::Option* epsilon = dp_cmd->add_option(
      "--epsilon", dp->epsilon,
      "Instead of --noise-multiplier: the smallest sigma that keeps epsilon within this (with "
      "--config: the run's dp.noise_multiplier for its rounds)");
  noise->excludes(epsilon);
  dp_cmd->add_option("--sample-rate", dp->sample_rate, "q, the chance a record is in a step");
  dp_cmd->add_option("--steps", dp->steps, "Number of noisy releases T");
  dp_cmd->add_option("--delta", dp->delta, "delta")->capture_default_str();
  dp_cmd->add_option("--model-values", dp->model_values,
                     "Under dp.mode = distributed: the run's model size, which sets its encoding");
  return [args, label, dp, dp_cmd, noise, epsilon] {
    if (dp_cmd->parsed() && (!dp->config.empty() || !dp->sets.empty())) {
      RunOptions o = RunConfig(dp->config, dp->sets);
      if (epsilon->count() > 0) {
        // The run's own noise multiplier for the target, over its rounds.
        const double sigma = NoiseMultiplierFor(dp->epsilon, [&](double z) {
          o.dp.noise_multiplier = z;
          return RunLedger(DpOptionsFrom(o), dp->model_values, o.rounds, 0).observers;
        });
        o.dp.noise_multiplier = sigma;
        const DpFedAvgOptions at = DpOptionsFrom(o);
        const int64_t m = Participations99(o.rounds, DpSampleRate(at));
        std::printf(
            "noise multiplier = %.4f: epsilon = %.6g at delta = %g after %lld rounds (dp.mode = %s) against "
            "observers of the models; against the server %s for a client in one round, %s in %lld\n",
            sigma, RunLedger(at, dp->model_values, o.rounds, 0).observers, DpDelta(at),
            static_cast<long long>(o.rounds), o.dp.mode.c_str(),
            Epsilon(RunLedger(at, dp->model_values, o.rounds, 1).server).c_str(),
            Epsilon(RunLedger(at, dp->model_values, o.rounds, m).server).c_str(), static_cast<long long>(m));
        return;
      }
      PrintRunLedger(o, dp->model_values);
      return;
    }
    if (dp_cmd->parsed() && epsilon->count() > 0) {
      const double sigma = NoiseMultiplierFor(dp->epsilon, [&](double z) {
        return SampledGaussianEpsilon(dp->sample_rate, z, dp->steps, dp->delta).epsilon;
      });
      std::printf("noise multiplier = %.4f: epsilon = %.6g at delta = %g (q = %g, %lld steps)\n", sigma,
                  SampledGaussianEpsilon(dp->sample_rate, sigma, dp->steps, dp->delta).epsilon, dp->delta,
                  dp->sample_rate, static_cast<long long>(dp->steps));
      return;
    }
    if (dp_cmd->parsed()) {
      if (noise->count() == 0)
        throw Error("privacy dp: give --noise-multiplier, --epsilon, or a run's --config/--set");
      const EpsilonAtOrder e =
          SampledGaussianEpsilon(dp->sample_rate, dp->noise_multiplier, dp->steps, dp->delta);
      if (e.order == 0) {
        std::printf("epsilon = 0 at delta = %g (%s: nothing depends on the data)\n", dp->delta,
                    dp->steps == 0 ? "no release, 0 steps" : "no record sampled, q = 0");
        return;
      }
      std::printf("epsilon = %.6g at delta = %g (RDP order %g; q = %g, sigma = %g, %lld steps)\n",
                  e.epsilon, dp->delta, e.order, dp->sample_rate, dp->noise_multiplier,
                  static_cast<long long>(dp->steps));
      return;
    }
    if (!label->parsed()) return;
    if (args->classes < 1) throw Error("--classes: expected at least 1");
    std::vector<double> truth(args->classes, 1.0 / args->classes);
    if (!args->distribution.empty()) {
      truth.clear();
      for (const std::string& item : SplitList(args->distribution)) {
        char* end = nullptr;
        truth.push_back(std::strtod(item.c_str(), &end));
        if (*end != '\0') throw Error("--distribution: '" + item + "' is not a number");
      }
      if (static_cast<int>(truth.size()) != args->classes) {
        throw Error("--distribution: " + std::to_string(truth.size()) + " probabilities for " +
                    std::to_string(args->classes) + " classes");
      }
    }
    nlohmann::json j;
    j["batch_types"] = NumBatchTypes(args->classes, args->samples);
    j["h_uniform_bits"] = BatchEntropyBits(std::vector<double>(args->classes, 1.0 / args->classes),
                                           args->samples);
    j["h_true_bits"] = BatchEntropyBits(truth, args->samples);
    j["leakage_s_bits"] = j["h_uniform_bits"].get<double>() - j["h_true_bits"].get<double>();
    if (args->clients > 0) {
      j["clients"] = args->clients;
      j["h_query_bits"] = EmpiricalBatchEntropyBits(truth, args->samples, args->clients, args->seed);
      j["leakage_q_bits"] = j["h_true_bits"].get<double>() - j["h_query_bits"].get<double>();
      j["leakage_t_bits"] = j["h_uniform_bits"].get<double>() - j["h_query_bits"].get<double>();
    }
    if (args->json) {
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("|B| = %.0f batch types (N = %d classes, K = %d labels per client)\n",
                j["batch_types"].get<double>(), args->classes, args->samples);
    std::printf("H(B|P_uni)  = %.3f bits\n", j["h_uniform_bits"].get<double>());
    std::printf("H(B|P_true) = %.3f bits\n", j["h_true_bits"].get<double>());
    std::printf("L_s         = %.3f bits (Eq. 28)\n", j["leakage_s_bits"].get<double>());
    if (args->clients > 0) {
      std::printf("H(B|C_U)    = %.3f bits (U = %lld shuffled batches, seed %llu)\n",
                  j["h_query_bits"].get<double>(), static_cast<long long>(args->clients),
                  static_cast<unsigned long long>(args->seed));
      std::printf("L_q         = %.3f bits (Eq. 34)\n", j["leakage_q_bits"].get<double>());
      std::printf("L_t         = %.3f bits (Eq. 36)\n", j["leakage_t_bits"].get<double>());
    }
  };
}

}  // namespace fedprof::cli
