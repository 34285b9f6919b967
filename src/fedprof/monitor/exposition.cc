#include "fedprof/monitor/exposition.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fedprof {

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%.0f", value);  // counts and rounds: 10, not 1e+01
    return buf;
  }
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  // The shortest form that reads back as the same double.
  for (int precision = 1; precision < 17; ++precision) {
    char shorter[40];
    std::snprintf(shorter, sizeof(shorter), "%.*g", precision, value);
    if (std::strtod(shorter, nullptr) == value) return shorter;
  }
  return buf;
}

void Exposition::Family(const std::string& name, const std::string& type, const std::string& help) {
  std::string escaped;
  for (char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped.push_back(c);
    }
  }
  text_ += "# HELP " + name + " " + escaped + "\n# TYPE " + name + " " + type + "\n";
}

void Exposition::Sample(const std::string& name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    text_ += '}';
  }
  text_ += ' ' + FormatSampleValue(value) + '\n';
}

void Exposition::Gauge(const std::string& name, const std::string& help, double value) {
  Family(name, "gauge", help);
  Sample(name, {}, value);
}

void Exposition::Counter(const std::string& name, const std::string& help, double value) {
  Family(name, "counter", help);
  Sample(name, {}, value);
}

void Exposition::Histogram(const std::string& name, const std::string& help,
                           const fedprof::Histogram& h) {
  Family(name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    Sample(name + "_bucket", {{"le", FormatSampleValue(h.bounds[i])}},
           static_cast<double>(cumulative));
  }
  Sample(name + "_bucket", {{"le", "+Inf"}}, static_cast<double>(h.count));
  Sample(name + "_sum", {}, h.sum);
  Sample(name + "_count", {}, static_cast<double>(h.count));
}

}  // namespace fedprof
