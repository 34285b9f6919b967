#include "fedprof/report/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

// Data kinds in the order plots list them, with their colours.
const std::vector<std::pair<std::string, std::string>> kKinds = {
    {"clean", "#2b8a3e"},       {"blurred", "#1c7ed6"},     {"salt_pepper", "#f08c00"},
    {"gaussian_noise", "#ae3ec9"}, {"polluted", "#868e96"}, {"irrelevant", "#e03131"},
    {"unknown", "#495057"},  // a deployment does not know its clients' data
};

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    rows.push_back(Split(line, ','));
  }
  return rows;
}

std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

// Whether `path` is a PNG file that was written to its end.
bool CompletePng(const std::string& path) {
  if (!FileExists(path)) return false;
  static const std::string kSignature("\x89PNG\r\n\x1a\n", 8);
  static const std::string kEnd("\0\0\0\0IEND\xae\x42\x60\x82", 12);
  try {
    const std::string png = ReadFile(path);
    return png.size() >= kSignature.size() + kEnd.size() &&
           png.compare(0, kSignature.size(), kSignature) == 0 &&
           png.compare(png.size() - kEnd.size(), kEnd.size(), kEnd) == 0;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

bool RunGnuplot(const std::string& script, const std::string& png_path) {
  const std::string tmp = png_path + ".tmp.png";
  const std::string full = "set terminal pngcairo size 960,540 font \"sans,10\" noenhanced\nset output " +
                           Quote(tmp) + "\n" + script + "\nunset output\n";
  FILE* p = ::popen("gnuplot 2>/dev/null", "w");
  if (p == nullptr) {
    LogWarning("cannot start gnuplot; " + png_path + " not drawn");
    return false;
  }
  const bool sent = std::fwrite(full.data(), 1, full.size(), p) == full.size();
  const int status = ::pclose(p);
  // gnuplot may exit 0 after a failed write (a full disk): only a PNG that
  // ends with its IEND chunk replaces the previous plot.
  if (!sent || status != 0 || !CompletePng(tmp) ||
      std::rename(tmp.c_str(), png_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    LogWarning("gnuplot failed; " + png_path + " not drawn");
    return false;
  }
  return true;
}

std::string LinesScript(const std::vector<Series>& series, const std::string& title,
                        const std::string& x_label, const std::string& y_label, bool log_x) {
  std::ostringstream s;
  s << "set title " << Quote(title) << "\nset xlabel " << Quote(x_label) << "\nset ylabel "
    << Quote(y_label) << "\nset key bottom right\nset grid\n";
  if (log_x) s << "set logscale x\nset format x \"1e%T\"\n";
  // The axis spans the data (gnuplot would extend it to the next tic).
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& line : series) {
    for (double x : line.x) {
      if (log_x && !(x > 0)) continue;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (lo < hi) s << "set xrange [" << FormatDouble(lo, "%.17g") << ":" << FormatDouble(hi, "%.17g") << "]\n";
  for (size_t i = 0; i < series.size(); ++i) {
    s << "$d" << i << " << EOD\n";
    for (size_t j = 0; j < series[i].x.size(); ++j) {
      s << series[i].x[j] << ' ' << series[i].y[j] << '\n';
    }
    s << "EOD\n";
  }
  s << "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    s << (i ? ", " : "") << "$d" << i << " using 1:2 with linespoints lw 2 pt 7 ps 0.5 title "
      << Quote(series[i].label);
  }
  s << "\n";
  return s.str();
}

bool PlotLines(const std::vector<Series>& series, const std::string& title,
               const std::string& x_label, const std::string& y_label,
               const std::string& png_path, bool log_x) {
  return RunGnuplot(LinesScript(series, title, x_label, y_label, log_x), png_path);
}

std::string LabelsScript(const std::vector<std::vector<int64_t>>& counts) {
  std::vector<size_t> order(counts.size());
  std::vector<int64_t> dominant(counts.size(), 0);
  size_t classes = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    order[k] = k;
    classes = std::max(classes, counts[k].size());
    if (!counts[k].empty()) {
      dominant[k] = std::max_element(counts[k].begin(), counts[k].end()) - counts[k].begin();
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return dominant[a] < dominant[b]; });
  std::ostringstream s;
  s << "set title \"Label shares of the first " << counts.size()
    << " clients (rows sorted by dominant label)\"\nset xlabel \"label\"\nset ylabel \"clients (sorted by dominant label)\"\n"
       "set cblabel \"share of the client's samples\"\nset cbrange [0:1]\n"
       "set palette defined (0 \"white\", 1 \"#1c7ed6\", 2 \"#0b2e59\")\n"
    << "set xrange [-0.5:" << classes - 0.5 << "]\nset yrange [-0.5:" << counts.size() - 0.5 << "]\n"
    << "set xtics 1\n$m << EOD\n";
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const std::vector<int64_t>& row = counts[order[pos]];
    double held = 0;
    for (int64_t v : row) held += static_cast<double>(v);
    for (size_t c = 0; c < classes; ++c) {
      const double share = held > 0 && c < row.size() ? static_cast<double>(row[c]) / held : 0.0;
      s << c << ' ' << pos << ' ' << FormatDouble(share, "%.4g") << '\n';
    }
  }
  s << "EOD\nplot $m using 1:2:3 with image notitle\n";
  return s.str();
}

bool PlotLabels(const std::vector<std::vector<int64_t>>& counts, const std::string& png_path) {
  if (counts.empty()) return false;
  return RunGnuplot(LabelsScript(counts), png_path);
}

bool PlotRun(const std::string& run_dir) {
  const auto clients = ReadCsv(run_dir + "/clients.csv");  // id,size,data_kind,...,times_selected,label_*
  if (clients.size() < 2) return false;
  const size_t times = std::find(clients[0].begin(), clients[0].end(), "times_selected") - clients[0].begin();
  if (times == clients[0].size()) return false;
  // Clients grouped by kind, in kKinds order, so bars and heat-map rows band.
  std::vector<size_t> order;
  std::vector<std::string> kinds_present;
  for (const auto& [kind, colour] : kKinds) {
    bool any = false;
    for (size_t r = 1; r < clients.size(); ++r) {
      if (clients[r][2] == kind) {
        order.push_back(r - 1);
        any = true;
      }
    }
    if (any) kinds_present.push_back(kind);
  }
  std::map<std::string, std::string> colour(kKinds.begin(), kKinds.end());

  std::ostringstream sel;
  sel << "set title \"Times each client was selected\"\nset xlabel \"client (grouped by data "
         "kind)\"\nset ylabel \"times selected\"\nset style fill solid 1.0 noborder\n"
         "set boxwidth 0.8\nset key top right\nset xrange [-1:"
      << order.size() << "]\n";
  for (const std::string& kind : kinds_present) {
    sel << "$" << kind << " << EOD\n";
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const auto& row = clients[order[pos] + 1];
      if (row[2] == kind) sel << pos << ' ' << row.at(times) << '\n';
    }
    sel << "EOD\n";
  }
  sel << "plot ";
  for (size_t i = 0; i < kinds_present.size(); ++i) {
    const std::string& kind = kinds_present[i];
    sel << (i ? ", " : "") << "$" << kind << " using 1:2 with boxes lc rgb "
        << Quote(colour[kind]) << " title " << Quote(kind);
  }
  sel << "\n";
  bool ok = RunGnuplot(sel.str(), run_dir + "/selection.png");

  if (FileExists(run_dir + "/scores.csv")) {
    const auto scores = ReadCsv(run_dir + "/scores.csv");  // round,c0,c1,...
    std::ostringstream heat;
    heat << "set title \"Client scores over rounds\"\nset xlabel \"round\"\n"
            "set ylabel \"client (grouped by data kind)\"\nset cblabel \"score\"\n"
            "set palette rgbformulae 33,13,10\n"
            "set yrange [-0.5:"
         << order.size() - 0.5 << "]\n";
    // Kind labels at the middle of each band.
    size_t start = 0;
    heat << "set ytics (";
    for (size_t i = 0; i < kinds_present.size(); ++i) {
      size_t count = 0;
      for (size_t idx : order) count += clients[idx + 1][2] == kinds_present[i];
      heat << (i ? ", " : "") << Quote(kinds_present[i]) << " " << start + count / 2.0;
      start += count;
    }
    // Round r's column spans [r - 0.5, r + 0.5]: the axis ends with the last round's.
    if (scores.size() > 1) {
      heat << ")\nset xrange [" << std::strtod(scores[1][0].c_str(), nullptr) - 0.5 << ":"
           << std::strtod(scores.back()[0].c_str(), nullptr) + 0.5 << "]\n$s << EOD\n";
    } else {
      heat << ")\n$s << EOD\n";
    }
    for (size_t r = 1; r < scores.size(); ++r) {
      for (size_t pos = 0; pos < order.size(); ++pos) {
        heat << scores[r][0] << ' ' << pos << ' ' << scores[r][order[pos] + 1] << '\n';
      }
    }
    heat << "EOD\nplot $s using 1:2:3 with image notitle\n";
    ok = RunGnuplot(heat.str(), run_dir + "/scores.png") && ok;
  }
  return ok;
}

}  // namespace fedprof
