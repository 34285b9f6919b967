// Numeric CSV tables with a header row.

#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/data/loaders.h"

namespace fedprof {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::string Where(const std::string& path, int64_t line) {
  return path + ": line " + std::to_string(line);
}

// Splits one line into cells, handling RFC 4180 quoting within the line.
// `cells` is reused across lines to avoid reallocating the strings; returns
// the number of cells.
size_t SplitCells(std::string_view line, const std::string& path,
                  int64_t line_number, std::vector<std::string>& cells) {
  size_t count = 0;
  size_t pos = 0;
  for (;;) {
    if (count == cells.size()) cells.emplace_back();
    std::string& cell = cells[count++];
    cell.clear();
    size_t start = pos;
    while (start < line.size() && (line[start] == ' ' || line[start] == '\t')) {
      ++start;
    }
    if (start < line.size() && line[start] == '"') {
      size_t i = start + 1;
      for (;;) {
        if (i >= line.size()) {
          throw Error(Where(path, line_number) + ", column " +
                      std::to_string(count) +
                      ": unterminated quoted cell, expected a closing '\"'");
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            cell.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        cell.push_back(line[i++]);
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',') {
        throw Error(Where(path, line_number) + ", column " +
                    std::to_string(count) +
                    ": expected ',' after a quoted "
                    "cell, found '" +
                    FileText(std::string(1, line[i])) + "'");
      }
      if (i >= line.size()) return count;
      pos = i + 1;
      continue;
    }
    const size_t comma = line.find(',', pos);
    const size_t end = comma == std::string_view::npos ? line.size() : comma;
    cell.assign(Trim(line.substr(pos, end - pos)));
    if (comma == std::string_view::npos) return count;
    pos = comma + 1;
  }
}

bool ParseNumber(std::string_view s, double& value) {
  s = Trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto result = std::from_chars(s.data(), s.data() + s.size(), value);
  return result.ec == std::errc() && result.ptr == s.data() + s.size() &&
         std::isfinite(value);
}

std::string JoinHeader(const std::vector<std::string>& header) {
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) {
    if (i > 0) out += ", ";
    out += FileText(header[i], 40);
  }
  return out;
}

}  // namespace

Dataset LoadCsv(const std::string& path, const CsvOptions& options) {
  return ParseCsv({path, ReadFile(path)}, options);
}

Dataset ParseCsv(const NamedBytes& file, const CsvOptions& options) {
  const std::string& path = file.name;
  const std::string text = MaybeGunzip(path, file.bytes);
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 BOM

  // Yields the next line without its terminator; false at end of input.
  int64_t line_number = 0;
  auto next_line = [&](std::string_view& line) {
    if (rest.empty()) return false;
    const size_t nl = rest.find('\n');
    line = rest.substr(0, nl);
    rest =
        nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    return true;
  };

  std::string_view line;
  bool have_header = false;
  while (next_line(line)) {
    if (!Trim(line).empty()) {
      have_header = true;
      break;
    }
  }
  if (!have_header) {
    throw Error(line_number == 0
                    ? Where(path, 1) + ": empty file, expected a header row"
                    : Where(path, line_number) +
                          ": only blank lines, expected a header row");
  }
  const int64_t header_line = line_number;
  std::vector<std::string> header;
  header.resize(SplitCells(line, path, line_number, header));
  const size_t num_columns = header.size();

  std::unordered_map<std::string, size_t> column_of;
  for (size_t c = 0; c < num_columns; ++c) {
    if (!column_of.emplace(header[c], c).second) {
      throw Error(Where(path, header_line) + ", column " +
                  std::to_string(c + 1) + ": duplicate column name \"" +
                  FileText(header[c], 40) + "\"");
    }
  }
  if (options.targets.empty()) {
    throw Error(path +
                ": no target column given; header has: " + JoinHeader(header));
  }
  if (options.classification && options.targets.size() != 1) {
    throw Error(path +
                ": classification expects exactly one target column, "
                "got " +
                std::to_string(options.targets.size()));
  }
  // role[c] >= 0: feature index; role[c] < 0: target -(role + 1).
  std::vector<int64_t> role(num_columns, 0);
  for (size_t t = 0; t < options.targets.size(); ++t) {
    const auto it = column_of.find(options.targets[t]);
    if (it == column_of.end()) {
      throw Error(Where(path, header_line) + ": unknown target column \"" +
                  options.targets[t] + "\", header has: " + JoinHeader(header));
    }
    if (role[it->second] < 0) {
      throw Error(path + ": target column \"" + options.targets[t] +
                  "\" is listed twice");
    }
    role[it->second] = -static_cast<int64_t>(t) - 1;
  }
  const auto num_targets = static_cast<int64_t>(options.targets.size());
  const int64_t num_features = static_cast<int64_t>(num_columns) - num_targets;
  if (num_features == 0) {
    throw Error(Where(path, header_line) +
                ": no feature columns left after removing the targets");
  }
  int64_t next_feature = 0;
  for (int64_t& r : role) {
    if (r >= 0) r = next_feature++;
  }

  std::vector<float> features;
  std::vector<double> targets;
  std::vector<std::string> cells;
  int64_t rows = 0;
  while (next_line(line)) {
    if (Trim(line).empty()) continue;
    const size_t count = SplitCells(line, path, line_number, cells);
    if (count != num_columns) {
      throw Error(Where(path, line_number) + ": expected " +
                  std::to_string(num_columns) +
                  " cells as in the header, found " + std::to_string(count));
    }
    features.resize(features.size() + num_features);
    targets.resize(targets.size() + num_targets);
    float* feature_row = features.data() + rows * num_features;
    double* target_row = targets.data() + rows * num_targets;
    for (size_t c = 0; c < num_columns; ++c) {
      double value = 0;
      if (!ParseNumber(cells[c], value)) {
        throw Error(Where(path, line_number) + ", column " +
                    std::to_string(c + 1) + " (\"" + FileText(header[c], 40) +
                    "\"): expected a number, found " +
                    (cells[c].empty() ? std::string("an empty cell")
                                      : "\"" + FileText(cells[c], 40) + "\""));
      }
      if (!options.classification || role[c] >= 0) {
        // Cells become float32 (features, regression targets): a finite
        // double beyond its range would silently turn into infinity.
        if (std::fabs(value) > std::numeric_limits<float>::max()) {
          throw Error(Where(path, line_number) + ", column " + std::to_string(c + 1) + " (\"" +
                      FileText(header[c], 40) + "\"): " + FileText(cells[c], 40) +
                      " is beyond the float32 range, expected |value| <= 3.4e38");
        }
      }
      if (role[c] >= 0) {
        feature_row[role[c]] = static_cast<float>(value);
        continue;
      }
      if (options.classification &&
          (value < 0 || value != std::floor(value) || value > 1e9)) {
        throw Error(
            Where(path, line_number) + ", column " + std::to_string(c + 1) +
            " (\"" + FileText(header[c], 40) +
            "\"): expected a non-negative integer class label, found \"" +
            FileText(cells[c], 40) + "\"");
      }
      target_row[-role[c] - 1] = value;
    }
    ++rows;
  }
  if (rows == 0) {
    throw Error(Where(path, line_number + 1) +
                ": no data rows after the header, expected at least one");
  }

  Dataset data;
  data.x = torch::empty({rows, num_features}, torch::kFloat32);
  std::memcpy(data.x.data_ptr<float>(), features.data(),
              features.size() * sizeof(float));
  if (options.classification) {
    data.y = torch::empty({rows}, torch::kInt64);
    int64_t* y = data.y.data_ptr<int64_t>();
    int64_t max_label = 0;
    for (int64_t i = 0; i < rows; ++i) {
      y[i] = static_cast<int64_t>(targets[i]);
      max_label = std::max(max_label, y[i]);
    }
    data.num_classes = max_label + 1;
  } else {
    data.y = torch::empty({rows, num_targets}, torch::kFloat32);
    float* y = data.y.data_ptr<float>();
    for (size_t i = 0; i < targets.size(); ++i)
      y[i] = static_cast<float>(targets[i]);
    data.num_classes = 0;
  }
  data.name = path;
  for (size_t c = 0; c < num_columns; ++c) {
    if (role[c] >= 0) data.feature_names.push_back(header[c]);
  }
  return data;
}

}  // namespace fedprof
