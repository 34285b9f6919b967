// fedprof privacy: privacy analyses of uploads.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/privacy/label_leakage.h"
#include "fedprof/privacy/rdp.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {

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
    double noise_multiplier = 1.0, sample_rate = 0.01, delta = 1e-6;
    int64_t steps = 1;
  };
  auto dp = std::make_shared<DpArgs>();
  CLI::App* dp_cmd = privacy->add_subcommand(
      "dp", "epsilon of clipped uploads with Gaussian noise, by the Renyi-DP accountant");
  dp_cmd->add_option("--noise-multiplier", dp->noise_multiplier, "sigma (noise sd / clip norm)")
      ->required();
  dp_cmd->add_option("--sample-rate", dp->sample_rate, "q, the chance a record is in a step")
      ->required();
  dp_cmd->add_option("--steps", dp->steps, "Number of noisy releases T")->required();
  dp_cmd->add_option("--delta", dp->delta, "delta")->capture_default_str();
  return [args, label, dp, dp_cmd] {
    if (dp_cmd->parsed()) {
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
