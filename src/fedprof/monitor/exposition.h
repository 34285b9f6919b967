#ifndef FEDPROF_MONITOR_EXPOSITION_H_
#define FEDPROF_MONITOR_EXPOSITION_H_

// The Prometheus text exposition format (version 0.0.4): families with
// HELP and TYPE lines, samples with escaped label values, cumulative
// histogram buckets.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fedprof {

// Observations counted into fixed upper bounds (seconds), plus +Inf.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts = std::vector<uint64_t>(bounds.size() + 1, 0);  // not cumulative
  double sum = 0;
  uint64_t count = 0;
  void Observe(double v);
};

class Exposition {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family: its HELP and TYPE lines.
  void Family(const std::string& name, const std::string& type, const std::string& help);
  void Sample(const std::string& name, const Labels& labels, double value);
  // A family of one unlabelled sample.
  void Gauge(const std::string& name, const std::string& help, double value);
  void Counter(const std::string& name, const std::string& help, double value);
  void Histogram(const std::string& name, const std::string& help, const fedprof::Histogram& h);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A label value escaped for the text format (\\, \" and \n).
std::string EscapeLabelValue(const std::string& value);
// A sample value: shortest round-tripping decimal, NaN, +Inf or -Inf.
std::string FormatSampleValue(double value);

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_EXPOSITION_H_
