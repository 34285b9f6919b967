#ifndef FEDPROF_RUN_RECORDER_H_
#define FEDPROF_RUN_RECORDER_H_

// The outputs of a run in its folder, written by one recorder that the round
// loop reports to: after every round metrics.csv, evaluation.csv (federated
// evaluation), scores.csv (FedProf, AFL) and checkpoint.bin; after the last,
// clients.csv, summary.json and the plots. Every file is replaced
// atomically, so a run killed at any moment leaves whole files.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/report/metrics.h"
#include "fedprof/server/server.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

// clients.csv: a row per client (id, size, data kind, cost-model specs,
// times selected) and, where label counts are known, label_0 ... label_{K-1}.
std::string ClientsCsv(const std::vector<ClientDescription>& rows, const std::vector<int64_t>& times_selected);

// What the clients' label counts say of the partition (those with counts).
struct PartitionFigures {
  int64_t clients = 0;       // clients counted
  double js = 0;             // mean Jensen-Shannon divergence to the pooled labels (MeanJsDivergence)
  double mean_classes = 0;   // distinct labels a client holds, on average
};
PartitionFigures PartitionFiguresOf(const std::vector<ClientDescription>& clients);
// summary.json's partition_js (null when no client's labels are known),
// partition_classes_per_client and partition_clients_counted, and
// `labels_png` of the first 100 clients counted (PlotLabels).
void WritePartitionFigures(const std::vector<ClientDescription>& clients, nlohmann::json* summary,
                           const std::string& labels_png);

class RunRecorder {
 public:
  // `state` is where the run starts: round 0, or a checkpoint (`resume`),
  // whose per-round files are cut back to its round.
  RunRecorder(const Config& config, const std::string& out_dir, int num_clients, bool regression,
              const ServerState& state, bool resume);

  // After each round: its metrics, the clients' federated evaluations (if
  // the round had some), the scores behind its selection (if the strategy
  // has any) and the checkpoint.
  void OnRound(const ServerState& state, const std::vector<ClientEvaluation>& evaluations,
               const std::vector<double>& scores);

  // After the last round: clients.csv, summary.json and the plots.
  void OnEnd(const ServerState& state, const std::vector<ClientDescription>& clients,
             int64_t num_params);

 private:
  const Config& config_;
  std::string out_dir_;
  std::string fingerprint_;
  MetricsColumns columns_;
  bool per_client_outputs_;  // a column or bar per client: small populations only
  std::string evaluation_;   // evaluation.csv so far
  std::string scores_;       // scores.csv so far
};

}  // namespace fedprof

#endif  // FEDPROF_RUN_RECORDER_H_
