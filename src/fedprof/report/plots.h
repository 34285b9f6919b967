#ifndef FEDPROF_REPORT_PLOTS_H_
#define FEDPROF_REPORT_PLOTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// PNG plots drawn by gnuplot. Each returns false, after one warning line on
// stderr, when gnuplot is missing or fails: plots are a convenience and never
// fail a run. A plot is written to a temporary file and renamed into place.

// From a run directory: selection.png (times each client was selected,
// coloured by data kind; the papers' Fig. 7) and, when scores.csv exists,
// scores.png (client scores over rounds, clients grouped by data kind; Fig. 8).
bool PlotRun(const std::string& run_dir);

// One accuracy-per-round line per series.
struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
};
// The x axis spans the data exactly (gnuplot's autoscale would pad it to
// the next tic): a plot per round ends at the last round.
bool PlotLines(const std::vector<Series>& series, const std::string& title,
               const std::string& x_label, const std::string& y_label,
               const std::string& png_path, bool log_x = false);
// The gnuplot script PlotLines runs (without terminal and output).
std::string LinesScript(const std::vector<Series>& series, const std::string& title,
                        const std::string& x_label, const std::string& y_label, bool log_x = false);

// labels.png: each client's label shares (counts[k][c] / its size) as a
// heat map, clients as rows sorted by their dominant label (ties by id).
bool PlotLabels(const std::vector<std::vector<int64_t>>& counts, const std::string& png_path);
// The gnuplot script PlotLabels runs.
std::string LabelsScript(const std::vector<std::vector<int64_t>>& counts);

// Runs gnuplot on `script`, whose output must be `png_path`; false on failure.
bool RunGnuplot(const std::string& script, const std::string& png_path);

}  // namespace fedprof

#endif  // FEDPROF_REPORT_PLOTS_H_
