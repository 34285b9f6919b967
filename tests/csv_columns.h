#ifndef FEDPROF_TESTS_CSV_COLUMNS_H_
#define FEDPROF_TESTS_CSV_COLUMNS_H_

// Reading the outputs of a run (its CSV files, summary.json) in end-to-end tests.

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof::testing_support {

// The columns of a CSV file with a header row, by header name.
inline std::map<std::string, std::vector<std::string>> Columns(const std::string& path) {
  std::istringstream in(ReadFile(path));
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> names = Split(line, ',');
  std::map<std::string, std::vector<std::string>> cols;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = Split(line, ',');
    for (size_t i = 0; i < names.size() && i < cells.size(); ++i) cols[names[i]].push_back(cells[i]);
  }
  return cols;
}

// A run's summary.json.
inline nlohmann::json Summary(const std::string& run_dir) {
  return nlohmann::json::parse(ReadFile(run_dir + "/summary.json"));
}

// The first `n` columns of every line of a CSV file.
inline std::string FirstColumns(const std::string& path, int n) {
  std::istringstream in(ReadFile(path));
  std::string line, out;
  while (std::getline(in, line)) {
    size_t at = 0;
    for (int i = 0; i < n && at != std::string::npos; ++i) at = line.find(',', at + (i > 0));
    out += line.substr(0, at) + "\n";
  }
  return out;
}

// A CSV file without its last column.
inline std::string WithoutLastColumn(const std::string& path) {
  std::istringstream in(ReadFile(path));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// metrics.csv without wall_s, the one column that is not reproducible.
inline std::string MetricsWithoutWall(const std::string& dir) { return WithoutLastColumn(dir + "/metrics.csv"); }

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_CSV_COLUMNS_H_
