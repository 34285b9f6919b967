// fedprof payload: the FbFTL paper's closed-form payloads (Eqs. 2-17).

#include <cstdio>
#include <memory>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/fbftl/payload.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

// Bits with a decimal prefix up to Tb, as the paper prints them.
std::string Bits(double bits) {
  const char* units[] = {"b", "Kb", "Mb", "Gb", "Tb"};
  int u = 0;
  while (bits >= 1000 && u < 4) {
    bits /= 1000;
    ++u;
  }
  return FormatDouble(bits, "%.4g") + " " + units[u];
}

}  // namespace

Runner AddPayload(CLI::App& app) {
  struct Args {
    std::string model = "vgg16", input = "3x224x224", cut = "fc2";
    int64_t classes = 10;
    PayloadSetup setup;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "payload", "Closed-form uplink/downlink payload and client compute of FL, SFL, FTL and FbFTL");
  sub->add_option("--model", args->model,
                  "vgg16, a transfer architecture (vgg_small, lenet5) or a model file")
      ->capture_default_str();
  sub->add_option("--input", args->input, "Input shape CxHxW")->capture_default_str();
  sub->add_option("--cut", args->cut, "First layer of the trained head")->capture_default_str();
  sub->add_option("--classes", args->classes, "Outputs")->capture_default_str();
  sub->add_option("--clients", args->setup.clients, "U")->capture_default_str();
  sub->add_option("--samples-per-client", args->setup.samples_per_client, "K_u")
      ->capture_default_str();
  sub->add_option("--fraction", args->setup.fraction, "C")->capture_default_str();
  sub->add_option("--bits", args->setup.bits, "d, bits per value")->capture_default_str();
  sub->add_option("--epochs-fl", args->setup.epochs_fl, "Epochs of FL and SFL")->capture_default_str();
  sub->add_option("--epochs-ftl-f", args->setup.epochs_ftl_f, "Epochs of FTL_f")->capture_default_str();
  sub->add_option("--epochs-ftl-c", args->setup.epochs_ftl_c, "Epochs of FTL_c")->capture_default_str();
  return [args] {
    const std::vector<std::string> dims = Split(args->input, 'x');
    int64_t shape[3];
    for (int i = 0; i < 3; ++i) {
      char* end = nullptr;
      shape[i] = dims.size() == 3 ? std::strtoll(dims[i].c_str(), &end, 10) : 0;
      if (dims.size() != 3 || *end != '\0' || shape[i] <= 0) {
        throw Error("--input " + args->input + ": expected CxHxW, e.g. 3x224x224");
      }
    }
    const std::vector<LayerCount> layers =
        PayloadLayers(args->model, {shape[0], shape[1], shape[2]}, args->classes);
    int64_t total = 0;
    for (const auto& l : layers) total += l.params;
    std::printf("%s at %s, %lld classes: %lld parameters; cut at %s\n", args->model.c_str(),
                args->input.c_str(), static_cast<long long>(args->classes),
                static_cast<long long>(total), args->cut.c_str());
    std::printf("| scheme | upload batches | params / batch | payload / batch | uplink P | downlink D | client compute X |\n"
                "|---|---|---|---|---|---|---|\n");
    for (const auto& r : ClosedFormPayloads(layers, args->cut, args->setup)) {
      std::printf("| %s | %.0f | %.0f | %s | %s | %s | %.3g |\n", r.scheme.c_str(),
                  r.upload_batches, r.params_per_batch, Bits(r.bits_per_batch).c_str(),
                  Bits(r.uplink_bits).c_str(), Bits(r.downlink_bits).c_str(), r.client_macs);
    }
  };
}

}  // namespace fedprof::cli
