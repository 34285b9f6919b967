#ifndef FEDPROF_REPORT_COMPARISON_H_
#define FEDPROF_REPORT_COMPARISON_H_

#include <string>
#include <vector>

namespace fedprof {

// One finished run of a comparison.
struct RunRecord {
  std::string label;  // strategy and aggregation, e.g. "fedprof-full"
  int64_t seed = 0;
  std::string dir;    // holds summary.json and metrics.csv
};

// Reads every run's summary.json and metrics.csv and writes into `out_dir`:
//   comparison.csv  one row per run;
//   comparison.md   per label over seeds: best accuracy mean ± sd, rounds,
//                   virtual time and energy to `target` (mean ± sd over the
//                   seeds that reached it, "—" if none did);
//   accuracy.png    accuracy per round, mean over seeds, one line per label.
// Returns the Markdown table.
std::string WriteComparison(const std::vector<RunRecord>& runs, double target,
                            const std::string& out_dir);

}  // namespace fedprof

#endif  // FEDPROF_REPORT_COMPARISON_H_
