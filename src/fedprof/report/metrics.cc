#include "fedprof/report/metrics.h"

#include "fedprof/core/text.h"

#include <cstdio>
#include <sstream>

namespace fedprof {
namespace {

// Nine significant digits: exact enough to compare runs, short enough to read.
std::string Num(double v) { return FormatDouble(v, "%.9g"); }

}  // namespace

std::string MetricsCsv(const std::vector<RoundMetrics>& rows, const MetricsColumns& columns) {
  const bool regression = columns.regression, federated = columns.federated;
  std::ostringstream out;
  out << "round," << (columns.online ? "online," : "") << "lr,selected,returned,refused,timed_out,"
      << (columns.buffered ? "staleness," : "") << "train_loss,"
      << (columns.dp ? "dp_clip_norm,dp_unclipped,dp_epsilon,dp_epsilon_server," : "")
      << (columns.fallback ? "fallback," : "") << "accuracy,loss"
      << (regression ? ",rmse" : "") << (columns.backdoor ? ",backdoor_success" : "")
      << (federated ? ",fed_clients,fed_accuracy,fed_loss" : "")
      << ",round_time_s,virtual_time_s,round_energy_wh,energy_wh,profiling_time_s,"
         "profiling_energy_wh,wall_s\n";
  for (const auto& r : rows) {
    out << r.round << ',';
    if (columns.online) out << r.online << ',';
    out << Num(r.lr) << ',' << r.selected << ',' << r.returned << ','
        << r.refused << ',' << r.timed_out << ',';
    if (columns.buffered) out << Num(r.staleness) << ',';
    out << Num(r.train_loss) << ',';
    if (columns.dp)
      out << Num(r.dp_clip_norm) << ',' << Num(r.dp_unclipped) << ',' << Num(r.dp_epsilon) << ','
          << Num(r.dp_epsilon_server) << ',';
    if (columns.fallback) out << (r.fell_back ? 1 : 0) << ',';
    if (r.evaluated) {
      out << Num(r.accuracy) << ',' << Num(r.loss);
      if (regression) out << ',' << Num(r.rmse);
    } else {
      out << ',' << (regression ? "," : "");
    }
    if (columns.backdoor) out << ',' << (r.backdoor_evaluated ? Num(r.backdoor_success) : "");
    if (federated) {
      if (r.fed_evaluated) {
        out << ',' << r.fed_clients << ',' << (regression ? "" : Num(r.fed_accuracy)) << ','
            << Num(r.fed_loss);
      } else {
        out << ",,,";
      }
    }
    out << ',' << Num(r.round_time_s) << ',' << Num(r.virtual_time_s) << ','
        << Num(r.round_energy_wh) << ',' << Num(r.energy_wh) << ',' << Num(r.profiling_time_s)
        << ',' << Num(r.profiling_energy_wh) << ',' << FormatDouble(r.wall_s, "%.3f")
        << '\n';
  }
  return out.str();
}

std::string EvaluationHeader() { return "round,client,samples,correct,loss\n"; }

std::string EvaluationRows(int64_t round, const std::vector<ClientEvaluation>& evaluations) {
  std::ostringstream out;
  for (const ClientEvaluation& e : evaluations) {
    out << round << ',' << e.client_id << ',' << e.samples << ',' << e.correct << ','
        << Num(e.loss) << '\n';
  }
  return out.str();
}

int64_t FirstRoundReaching(const std::vector<RoundMetrics>& rows, double target) {
  if (target <= 0) return -1;
  for (const auto& r : rows) {
    if (r.evaluated && r.accuracy >= target) return r.round;
  }
  return -1;
}

std::string ProgressLine(const RoundMetrics& m, int64_t rounds) {
  char acc[64] = "      -", loss[64] = "      -", line[256];
  if (m.evaluated) {
    std::snprintf(acc, sizeof(acc), "%.4f", m.accuracy);
    std::snprintf(loss, sizeof(loss), "%.4f", m.loss);
  }
  std::snprintf(line, sizeof(line),
                "round %4lld/%lld  acc %s  loss %s  clients %d/%d  time %9.1f s  energy "
                "%8.3f Wh  wall %6.1f s",
                static_cast<long long>(m.round), static_cast<long long>(rounds), acc, loss, m.returned,
                m.selected, m.virtual_time_s, m.energy_wh, m.wall_s);
  return line;
}

}  // namespace fedprof
