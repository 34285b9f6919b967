// fedprof partition: how a config shares the data set out, without training.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/run/recorder.h"
#include "fedprof/sim/population.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {

Runner AddPartition(CLI::App& app) {
  struct Args {
    std::string config, out;
    std::vector<std::string> sets;
    int show = 20;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "partition", "Share the data set out as a config says and describe it, without training");
  sub->add_option("--config", args->config, "Experiment config (TOML)");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--out", args->out, "Where clients.csv, labels.png and partition.json go")->required();
  sub->add_option("--show", args->show, "Clients whose label counts are printed (default 20)")
      ->check(CLI::Range(0, 1000000));
  return [args] {
    const Config config = Config::Load(args->config, args->sets);
    const RunOptions& o = config.options();
    const TrainTest data = LoadData(o.data, static_cast<uint64_t>(o.seed));
    const Population population(data.train, o);
    // The same rows as a run's clients.csv, without what only training knows
    // (the cost model's columns and times_selected are 0).
    std::vector<ClientDescription> rows(static_cast<size_t>(population.size()));
    std::vector<int64_t> sizes(rows.size());
    for (int k = 0; k < population.size(); ++k) {
      rows[k].size = sizes[k] = population.num_samples(k);
      rows[k].kind = DataKindName(population.kind(k));
      if (k < o.report.per_client_limit) rows[k].label_counts = population.LabelCounts(k);
    }
    MakeDirs(args->out);
    WriteFileAtomic(args->out + "/clients.csv", ClientsCsv(rows, {}));
    nlohmann::json summary;
    summary["partition_kind"] = o.partition.kind;
    summary["clients"] = rows.size();
    WritePartitionFigures(rows, &summary, args->out + "/labels.png");
    std::sort(sizes.begin(), sizes.end());
    int64_t held = 0;
    for (int64_t s : sizes) held += s;
    summary["samples_held"] = held;
    summary["size_min"] = sizes.front();
    summary["size_median"] = sizes[sizes.size() / 2];
    summary["size_max"] = sizes.back();
    WriteFileAtomic(args->out + "/partition.json", summary.dump(2) + "\n");

    std::printf(population.on_demand()
                    ? "partition.kind = %s: %zu clients drawing %lld samples (with replacement) of the %lld "
                      "training samples\n"
                    : "partition.kind = %s: %zu clients holding %lld of the %lld training samples\n",
                o.partition.kind.c_str(), rows.size(), static_cast<long long>(held),
                static_cast<long long>(data.train.size()));
    std::printf("client sizes: min %lld, median %lld, max %lld\n", static_cast<long long>(sizes.front()),
                static_cast<long long>(sizes[sizes.size() / 2]), static_cast<long long>(sizes.back()));
    const PartitionFigures f = PartitionFiguresOf(rows);
    if (f.clients > 0) {
      std::printf("labels a client holds: %.2f on average; mean Jensen-Shannon divergence to the pooled "
                  "labels: %.4f (%lld clients counted)\n",
                  f.mean_classes, f.js, static_cast<long long>(f.clients));
      const size_t show = std::min<size_t>(static_cast<size_t>(args->show), rows.size());
      if (show > 0 && !rows[0].label_counts.empty()) {
        std::printf("%-8s %8s ", "client", "size");
        for (size_t c = 0; c < rows[0].label_counts.size(); ++c) std::printf(" %6s", ("l" + std::to_string(c)).c_str());
        std::printf("\n");
        for (size_t k = 0; k < show; ++k) {
          std::printf("%-8zu %8lld ", k, static_cast<long long>(rows[k].size));
          for (int64_t v : rows[k].label_counts) std::printf(" %6lld", static_cast<long long>(v));
          std::printf("\n");
        }
      }
    }
    std::printf("outputs in %s (clients.csv, labels.png, partition.json)\n", args->out.c_str());
  };
}

}  // namespace fedprof::cli
