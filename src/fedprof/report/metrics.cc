#include "fedprof/report/metrics.h"

#include "fedprof/core/text.h"

#include <cstdio>
#include <sstream>

namespace fedprof {
namespace {

// Nine significant digits: exact enough to compare runs, short enough to read.
std::string Num(double v) { return FormatDouble(v, "%.9g"); }

}  // namespace

std::string MetricsCsv(const std::vector<RoundMetrics>& rows, bool regression) {
  std::ostringstream out;
  out << "round,lr,selected,returned,refused,timed_out,train_loss,accuracy,loss" << (regression ? ",rmse" : "")
      << ",round_time_s,virtual_time_s,round_energy_wh,energy_wh,profiling_time_s,"
         "profiling_energy_wh,wall_s\n";
  for (const auto& r : rows) {
    out << r.round << ',' << Num(r.lr) << ',' << r.selected << ',' << r.returned << ','
        << r.refused << ',' << r.timed_out << ',' << Num(r.train_loss) << ',';
    if (r.evaluated) {
      out << Num(r.accuracy) << ',' << Num(r.loss);
      if (regression) out << ',' << Num(r.rmse);
    } else {
      out << ',' << (regression ? "," : "");
    }
    out << ',' << Num(r.round_time_s) << ',' << Num(r.virtual_time_s) << ','
        << Num(r.round_energy_wh) << ',' << Num(r.energy_wh) << ',' << Num(r.profiling_time_s)
        << ',' << Num(r.profiling_energy_wh) << ',' << FormatDouble(r.wall_s, "%.3f")
        << '\n';
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

}  // namespace fedprof
