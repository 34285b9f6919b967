#ifndef FEDPROF_REPORT_METRICS_H_
#define FEDPROF_REPORT_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// One client's federated evaluation of a round's global model (a row of
// evaluation.csv).
struct ClientEvaluation {
  int client_id = -1;
  int64_t samples = 0;
  int64_t correct = 0;  // classification only
  double loss = 0;      // mean over its samples
};

// One row of metrics.csv.
struct RoundMetrics {
  int64_t round = 0;
  double lr = 0;
  int selected = 0;         // clients asked to train
  int returned = 0;         // usable results, aggregated
  int refused = 0;          // results refused (failed, NaN, wrong size, bad profile, ...)
  int timed_out = 0;        // clients that sent nothing in time or left the round
  int online = 0;           // clients that could be selected when the round started
  double train_loss = 0;    // mean local loss of the usable results
  bool evaluated = false;   // false: accuracy/loss columns are empty this round
  double accuracy = 0;      // R^2 for regression
  double loss = 0;
  double rmse = 0;          // regression only
  // The backdoor's success rate (attack.kind = backdoor): the share of the
  // triggered test images of other classes classified as attack.target.
  bool backdoor_evaluated = false;  // false: the column is empty this round
  double backdoor_success = 0;
  // Federated evaluation (eval.federated_every): the global model on the
  // data of the clients asked, weighted by their sample counts.
  bool fed_evaluated = false;  // false: the fed_* columns are empty this round
  int fed_clients = 0;         // clients whose evaluation was used
  double fed_accuracy = 0;     // classification only
  double fed_loss = 0;
  // An asynchronous run's step (strategy.aggregator = fedbuff): the mean
  // staleness of its results, in model versions.
  double staleness = 0;
  // User-level DP (dp.mode): the round's clip norm C, the share of its
  // accepted updates within C, ε (at dp.delta) of the rounds so far against
  // observers of the models, and against the server of the client that
  // took part in the most of them (DpFedAvg::EpsilonAgainstServer); 0
  // without DP.
  double dp_clip_norm = 0;
  double dp_unclipped = 0;
  double dp_epsilon = 0;
  double dp_epsilon_server = 0;
  // robust.fallback: the round's step was the server's own update, which
  // validated better than the clients' estimate.
  bool fell_back = false;
  double round_time_s = 0;  // Eq. 27: virtual (cost model) in simulation, measured in a deployment
  double virtual_time_s = 0;
  double round_energy_wh = 0;
  double profiling_time_s = 0;     // of round_time_s, what profiling added (Eq. 31)
  double profiling_energy_wh = 0;  // of round_energy_wh, E_RP (Eq. 34)
  double energy_wh = 0;
  double wall_s = 0;        // real elapsed time since the run started
};

// Which columns a run's metrics.csv has beyond the common ones.
struct MetricsColumns {
  bool regression = false;  // rmse
  bool federated = false;   // fed_clients, fed_accuracy, fed_loss
  bool backdoor = false;    // backdoor_success
  bool online = false;      // online (simulated availability)
  bool buffered = false;    // staleness (asynchronous: one row per server step)
  bool dp = false;          // dp_clip_norm, dp_unclipped, dp_epsilon, dp_epsilon_server (user-level DP)
  bool fallback = false;    // fallback (robust.fallback)
};

// metrics.csv as text: a header and one row per round. Every column but
// wall_s is reproducible from the seed. `online` follows `round`,
// `staleness` follows `timed_out`, the DP columns and `fallback` `train_loss`; the
// backdoor's success rate follows the central evaluation's columns, then
// come federated evaluation's.
std::string MetricsCsv(const std::vector<RoundMetrics>& rows, const MetricsColumns& columns);

// The line a run prints after round m of `rounds` (report.progress), and
// that Python's progress=True prints.
std::string ProgressLine(const RoundMetrics& m, int64_t rounds);

// evaluation.csv: its header, and the rows of one round's evaluations.
std::string EvaluationHeader();
std::string EvaluationRows(int64_t round, const std::vector<ClientEvaluation>& evaluations);

// The first round whose accuracy reaches `target` (> 0), or -1.
int64_t FirstRoundReaching(const std::vector<RoundMetrics>& rows, double target);

}  // namespace fedprof

#endif  // FEDPROF_REPORT_METRICS_H_
