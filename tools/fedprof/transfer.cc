// fedprof pretrain and fedprof fbftl: source models and the transfer schemes
// of the FbFTL paper.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/rng.h"
#include "fedprof/fbftl/pretrain.h"
#include "fedprof/fbftl/schemes.h"
#include "fedprof/models/staged_model.h"
#include "fedprof/report/plots.h"
#include "fedprof/sim/population.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

struct TransferArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
};

Config ReadConfig(const TransferArgs& args) {
  return Config::Load(args.config, args.sets);
}

CLI::App* AddCommon(CLI::App& app, const char* name, const char* help, TransferArgs* args,
                    const char* out_help) {
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("--config", args->config, "Config (TOML)");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--out", args->out, out_help);
  sub->footer("Every option: fedprof options");
  return sub;
}

}  // namespace

Runner AddPretrain(CLI::App& app) {
  auto args = std::make_shared<TransferArgs>();
  AddCommon(app, "pretrain", "Train a source model on the data.* set for transfer learning",
            args.get(), "Model file to write (required)");
  return [args] {
    if (args->out.empty()) throw Error("--out: name the model file to write, e.g. source.pt");
    const Config config = ReadConfig(*args);
    const RunOptions& options = config.options();
    const TrainTest data = LoadData(options.data, options.seed);
    const Dataset& source = options.pretrain.on_holdout ? data.holdout : data.train;
    if (source.size() == 0) {
      throw Error("pretrain.on_holdout: the held-out share is empty; set data.holdout_share");
    }
    const std::vector<int64_t> shape(source.x.sizes().begin() + 1, source.x.sizes().end());
    torch::manual_seed(Mix64(static_cast<uint64_t>(options.seed) ^
                             static_cast<uint64_t>(Stream::kModelInit)));
    // He initialisation: the default leaves vgg_small barely trainable.
    auto network = MakeStagedModel(options.pretrain.architecture, shape,
                                   source.num_classes);
    network->Reinitialize(0, network->num_stages());
    const double accuracy = Pretrain(options.pretrain, static_cast<uint64_t>(options.seed), *network,
                                     source, data.test);
    network->Save(args->out);
    std::printf("source model %s on %lld %s samples (test accuracy %.4f) written to %s\n",
                options.pretrain.architecture.c_str(),
                static_cast<long long>(source.size()), source.name.c_str(), accuracy,
                args->out.c_str());
  };
}

Runner AddFbftl(CLI::App& app) {
  auto args = std::make_shared<TransferArgs>();
  AddCommon(app, "fbftl",
            "Transfer a source model to the data.* task with FL, FTL_f, FTL_c, SFL and FbFTL",
            args.get(), "Output directory (default runs/<config>-<time>)");
  return [args] {
    const Config config = ReadConfig(*args);
    const RunOptions& options = config.options();
    const std::string& source_path = options.transfer.source_model;
    if (source_path.empty()) {
      throw Error("transfer.source_model: name the source model (fedprof pretrain writes one)");
    }
    if (!FileExists(source_path)) throw Error(source_path + ": no such model file");
    const TrainTest data = LoadData(options.data, options.seed);
    const std::vector<int64_t> shape(data.train.x.sizes().begin() + 1, data.train.x.sizes().end());
    const auto source = LoadStagedModel(source_path, shape, data.train.num_classes);
    const std::string out = args->out.empty() ? DefaultOutDir(args->config, "fbftl") : args->out;
    const std::vector<SchemeRun> runs = RunTransferSchemes(
        options.transfer, static_cast<uint64_t>(options.seed), *source, data.train, data.test);
    MakeDirs(out);
    WriteFileAtomic(out + "/config.toml", config.ToToml());
    WriteFileAtomic(out + "/schemes.csv", SchemesCsv(runs));
    WriteFileAtomic(out + "/curves.csv", CurvesCsv(runs));
    const std::string table = SchemesMarkdown(runs);
    WriteFileAtomic(out + "/schemes.md", table);
    std::vector<Series> series;
    for (const SchemeRun& r : runs) {
      Series s{r.scheme, {}, {}};
      for (const CurvePoint& p : r.curve) {
        s.x.push_back(static_cast<double>(p.uplink_bytes));
        s.y.push_back(p.test_accuracy);
      }
      series.push_back(std::move(s));
    }
    PlotLines(series, "Test accuracy against uplink (after each epoch)", "uplink bytes",
              "test accuracy", out + "/uplink.png", /*log_x=*/true);
    std::printf("\n%s\noutputs in %s (schemes.md, schemes.csv, curves.csv, uplink.png, "
                "config.toml)\n",
                table.c_str(), out.c_str());
  };
}

}  // namespace fedprof::cli
