// fedprof privacy: privacy analyses of uploads.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/aggregation/dp_fedavg.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/privacy/label_leakage.h"
#include "fedprof/privacy/rdp.h"
#include "fedprof/strategy/strategy.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

// The ledger of a run's config, round by round (the rounds printed: the
// first, every tenth of the run, the last), and where dp.target_epsilon
// stops it: the numbers the run will write to metrics.csv.
void PrintRunLedger(const std::string& config_path, const std::vector<std::string>& sets) {
  Config config;
  if (!config_path.empty()) config.MergeTomlFile(config_path);
  for (const auto& s : sets) config.SetAssignment(s);
  const RunOptions& o = config.options();
  if (o.dp.mode == "off")
    throw Error("privacy dp: the run has dp.mode = off: it releases its models without noise");
  const DpFedAvgOptions dp = DpOptionsFrom(o);
  std::printf(
      "dp.mode = %s: N = %lld clients, K = %lld expected a round (q = %g charged), noise multiplier %g, "
      "delta = %g, %lld rounds\n",
      o.dp.mode.c_str(), static_cast<long long>(dp.num_clients), static_cast<long long>(dp.expected_clients),
      DpSampleRate(dp), dp.noise_multiplier,
      DpDelta(dp), static_cast<long long>(o.rounds));
  const int64_t every = std::max<int64_t>(1, o.rounds / 10);
  int64_t stop = 0;
  double stop_epsilon = 0;
  for (int64_t round = 1; round <= o.rounds; ++round) {
    const double e = DpEpsilon(dp, round);
    if (dp.target_epsilon > 0 && e > dp.target_epsilon) {
      stop = round;
      stop_epsilon = e;
      break;
    }
    if (round == 1 || round % every == 0 || round == o.rounds) {
      std::printf("round %6lld  epsilon %.6g\n", static_cast<long long>(round), e);
    }
  }
  if (stop > 0) {
    std::printf("dp.target_epsilon = %g stops the run after round %lld (round %lld would reach %.6g)\n",
                dp.target_epsilon, static_cast<long long>(stop - 1), static_cast<long long>(stop),
                stop_epsilon);
  }
}

// The smallest σ (to 1e-4 relative) whose ε after `steps` releases at rate q
// is at most `target`: ε falls as σ grows, so bisection.
double NoiseMultiplierFor(double target, double q, int64_t steps, double delta) {
  if (!(target > 0)) throw Error("--epsilon: expected a value > 0");
  auto eps = [&](double sigma) { return SampledGaussianEpsilon(q, sigma, steps, delta).epsilon; };
  double lo = 0, hi = 1;
  while (eps(hi) > target) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6) throw Error("--epsilon: no noise multiplier up to 1e6 reaches it");
  }
  while (hi - lo > 1e-4 * hi) {
    const double mid = (lo + hi) / 2;
    (eps(mid) > target ? lo : hi) = mid;
  }
  return hi;
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
    int64_t steps = 1;
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
  CLI::Option* epsilon =
      dp_cmd->add_option("--epsilon", dp->epsilon,
                         "Instead of --noise-multiplier: the smallest sigma that keeps epsilon within this");
  noise->excludes(epsilon);
  dp_cmd->add_option("--sample-rate", dp->sample_rate, "q, the chance a record is in a step");
  dp_cmd->add_option("--steps", dp->steps, "Number of noisy releases T");
  dp_cmd->add_option("--delta", dp->delta, "delta")->capture_default_str();
  return [args, label, dp, dp_cmd, noise, epsilon] {
    if (dp_cmd->parsed() && (!dp->config.empty() || !dp->sets.empty())) {
      PrintRunLedger(dp->config, dp->sets);
      return;
    }
    if (dp_cmd->parsed() && epsilon->count() > 0) {
      const double sigma = NoiseMultiplierFor(dp->epsilon, dp->sample_rate, dp->steps, dp->delta);
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
