#include "fedprof/report/comparison.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/report/plots.h"

namespace fedprof {
namespace {

struct Stats {
  std::vector<double> values;
  void Add(double v) { values.push_back(v); }
  double Mean() const {
    double s = 0;
    for (double v : values) s += v;
    return values.empty() ? 0 : s / static_cast<double>(values.size());
  }
  // Sample standard deviation (n - 1); 0 for a single value.
  double Sd() const {
    if (values.size() < 2) return 0;
    const double m = Mean();
    double s = 0;
    for (double v : values) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(values.size() - 1));
  }
};

std::string MeanSd(const Stats& s, const char* fmt, size_t runs) {
  if (s.values.empty()) return "—";
  std::string out = FormatDouble(s.Mean(), fmt) + " ± " + FormatDouble(s.Sd(), fmt);
  if (s.values.size() < runs) {
    out += " (" + std::to_string(s.values.size()) + "/" + std::to_string(runs) + ")";
  }
  return out;
}

// Accuracy per evaluated round from metrics.csv.
std::map<int64_t, double> AccuracyByRound(const std::string& path) {
  std::map<int64_t, double> acc;
  std::istringstream in(ReadFile(path));
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = Split(line, ',');
  size_t col = 0;
  while (col < header.size() && header[col] != "accuracy") ++col;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = Split(line, ',');
    if (col < cells.size() && !cells[col].empty()) acc[std::stoll(cells[0])] = std::stod(cells[col]);
  }
  return acc;
}

}  // namespace

std::string WriteComparison(const std::vector<RunRecord>& runs, double target,
                            const std::string& out_dir) {
  struct Group {
    size_t runs = 0;
    Stats best, rounds, time, energy, wall;
    std::map<int64_t, Stats> accuracy;
  };
  std::vector<std::string> labels;
  std::map<std::string, Group> groups;
  std::vector<nlohmann::json> summaries;
  bool backdoor = false;  // a backdoor's success rates, when any run measured one
  for (const RunRecord& run : runs) {
    try {
      summaries.push_back(nlohmann::json::parse(ReadFile(run.dir + "/summary.json")));
    } catch (const nlohmann::json::exception& e) {
      throw Error(run.dir + "/summary.json: " + e.what());
    }
    backdoor = backdoor || summaries.back().contains("final_backdoor_success");
  }
  std::ostringstream csv;
  csv << "strategy,seed,best_accuracy,best_round,final_accuracy,rounds_to_target,"
         "virtual_time_to_target_s,energy_to_target_wh,virtual_time_s,energy_wh,wall_s"
      << (backdoor ? ",final_backdoor_success,highest_backdoor_success" : "") << '\n';
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunRecord& run = runs[i];
    const nlohmann::json& s = summaries[i];
    if (!groups.count(run.label)) labels.push_back(run.label);
    Group& g = groups[run.label];
    ++g.runs;
    g.best.Add(s.at("best_accuracy"));
    g.wall.Add(s.at("wall_s"));
    const bool reached = !s.at("rounds_to_target").is_null();
    if (reached) {
      g.rounds.Add(s.at("rounds_to_target"));
      g.time.Add(s.at("virtual_time_to_target_s"));
      g.energy.Add(s.at("energy_to_target_wh"));
    }
    for (const auto& [round, acc] : AccuracyByRound(run.dir + "/metrics.csv")) {
      g.accuracy[round].Add(acc);
    }
    auto opt = [&](const char* key) {
      return !s.contains(key) || s.at(key).is_null() ? std::string() : s.at(key).dump();
    };
    csv << run.label << ',' << run.seed << ',' << s.at("best_accuracy").dump() << ','
        << s.at("best_round").dump() << ',' << s.at("final_accuracy").dump() << ','
        << opt("rounds_to_target") << ',' << opt("virtual_time_to_target_s") << ','
        << opt("energy_to_target_wh") << ',' << s.at("virtual_time_s").dump() << ','
        << s.at("energy_wh").dump() << ',' << s.at("wall_s").dump();
    if (backdoor) csv << ',' << opt("final_backdoor_success") << ',' << opt("highest_backdoor_success");
    csv << '\n';
  }

  std::ostringstream md;
  const std::string t = FormatDouble(target);
  md << "| strategy | runs | best accuracy | rounds to " << t << " | virtual time to " << t
     << " (min) | energy to " << t << " (Wh) | wall (s) |\n|---|---|---|---|---|---|---|\n";
  std::vector<Series> series;
  for (const std::string& label : labels) {
    const Group& g = groups[label];
    Stats minutes;
    for (double v : g.time.values) minutes.Add(v / 60.0);
    md << "| " << label << " | " << g.runs << " | " << MeanSd(g.best, "%.4f", g.runs) << " | "
       << MeanSd(g.rounds, "%.1f", g.runs) << " | " << MeanSd(minutes, "%.1f", g.runs) << " | "
       << MeanSd(g.energy, "%.3f", g.runs) << " | " << FormatDouble(g.wall.Mean(), "%.0f") << " |\n";
    Series line;
    line.label = label;
    for (const auto& [round, stats] : g.accuracy) {
      line.x.push_back(static_cast<double>(round));
      line.y.push_back(stats.Mean());
    }
    series.push_back(std::move(line));
  }
  WriteFileAtomic(out_dir + "/comparison.csv", csv.str());
  WriteFileAtomic(out_dir + "/comparison.md", md.str());
  PlotLines(series, "Test accuracy (mean over seeds)", "round", "accuracy",
            out_dir + "/accuracy.png");
  return md.str();
}

}  // namespace fedprof
