#include "fedprof/sim/availability.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"

namespace fedprof {

OnOffAvailability::OnOffAvailability(int num_clients, double online_mean_s, double offline_mean_s,
                                     uint64_t seed)
    : online_mean_s_(online_mean_s),
      offline_mean_s_(offline_mean_s),
      seed_(seed),
      periods_(static_cast<size_t>(std::max(0, num_clients))) {
  if (!(online_mean_s > 0) || !(offline_mean_s >= 0)) {
    throw Error("availability.online_mean_s, offline_mean_s: expected > 0 and >= 0");
  }
}

double OnOffAvailability::Draw(int client, uint32_t index, bool online) const {
  const double u = HashUniform01(seed_, Stream::kAvailability, {static_cast<uint64_t>(client), index});
  return -(online ? online_mean_s_ : offline_mean_s_) * std::log1p(-u);
}

Availability::State OnOffAvailability::At(int client, double t) {
  Period& p = periods_.at(static_cast<size_t>(client));
  if (p.end < p.start || t < p.start) {  // first call, or back in time: from t = 0
    const double u = HashUniform01(seed_, Stream::kAvailability, {static_cast<uint64_t>(client), ~uint64_t{0}});
    p.online = u * (online_mean_s_ + offline_mean_s_) < online_mean_s_;
    p.index = 0;
    p.start = 0;
    p.end = Draw(client, 0, p.online);
  }
  while (t >= p.end) {
    p.start = p.end;
    p.online = !p.online;
    ++p.index;
    p.end = p.start + Draw(client, p.index, p.online);
  }
  return {p.online, p.end};
}

namespace {

// A non-negative decimal number that is the whole of `cell`, or NaN.
double Number(const std::string& cell) {
  // Plain decimals only: strtod would also take hex, "inf" and "nan".
  if (cell.empty() || cell.size() > 64 || cell.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    return NAN;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(cell.c_str(), &end);
  return end == cell.c_str() + cell.size() && errno == 0 && std::isfinite(v) ? v : NAN;
}

constexpr double kMaxTraceTime_s = 1e15;
constexpr size_t kMaxLineLength = 256;

}  // namespace

std::vector<std::vector<OnlineInterval>> ParseAvailabilityTrace(const std::string& text,
                                                                const std::string& name, int num_clients) {
  std::vector<std::vector<OnlineInterval>> intervals(static_cast<size_t>(std::max(0, num_clients)));
  bool header = false;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, std::min(eol - pos, kMaxLineLength + 1));
    const bool too_long = eol - pos > kMaxLineLength;
    pos = eol + 1;
    ++line_no;
    const std::string at = "availability.trace: " + name + ":" + std::to_string(line_no) + ": ";
    if (too_long) throw Error(at + "a line longer than " + std::to_string(kMaxLineLength) + " bytes");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != "client,start,end") {
        throw Error(at + "expected the header 'client,start,end', got '" + Printable(line, 40) + "'");
      }
      header = true;
      continue;
    }
    const std::vector<std::string> cells = Split(line, ',');
    if (cells.size() != 3) {
      throw Error(at + "expected 3 values (client,start,end), got " + std::to_string(cells.size()));
    }
    const double client = Number(cells[0]), start = Number(cells[1]), end = Number(cells[2]);
    if (!(client >= 0 && client < num_clients && client == std::floor(client) &&
          cells[0].find_first_not_of("0123456789") == std::string::npos)) {
      throw Error(at + "client '" + FileText(cells[0], 20) + "' is not an id in [0, " +
                  std::to_string(num_clients) + ")");
    }
    if (!(start >= 0 && end > start && end <= kMaxTraceTime_s)) {
      throw Error(at + "expected 0 <= start < end <= 1e15 seconds, got '" + FileText(cells[1], 20) + "', '" +
                  FileText(cells[2], 20) + "'");
    }
    intervals[static_cast<size_t>(client)].push_back({start, end});
  }
  if (!header) throw Error("availability.trace: " + name + ": no header line 'client,start,end'");
  for (auto& list : intervals) {
    std::sort(list.begin(), list.end(),
              [](const OnlineInterval& a, const OnlineInterval& b) { return a.start < b.start; });
    std::vector<OnlineInterval> merged;
    for (const OnlineInterval& i : list) {
      if (!merged.empty() && i.start <= merged.back().end) {
        merged.back().end = std::max(merged.back().end, i.end);
      } else {
        merged.push_back(i);
      }
    }
    list = std::move(merged);
  }
  return intervals;
}

Availability::State TraceAvailability::At(int client, double t) {
  const std::vector<OnlineInterval>& list = intervals_.at(static_cast<size_t>(client));
  auto after = std::upper_bound(list.begin(), list.end(), t,
                                [](double time, const OnlineInterval& i) { return time < i.start; });
  if (after != list.begin() && t < (after - 1)->end) return {true, (after - 1)->end};
  return {false, after == list.end() ? INFINITY : after->start};
}

DiurnalAvailability::DiurnalAvailability(int num_clients, const DiurnalShape& shape, uint64_t seed)
    : shape_(shape), seed_(seed), runs_(static_cast<size_t>(std::max(0, num_clients))) {
  const bool valid = shape.slot_s > 0 && shape.day_s > 0 && shape.share >= 0 && shape.share <= 1 &&
                     shape.amplitude >= 0 && shape.amplitude <= 1 && shape.time_zones_h >= 0 &&
                     shape.time_zones_h <= 24;  // NaN fails too
  if (!valid) {
    throw Error("availability (diurnal): expected slot_s > 0, a share and an amplitude in [0, 1] and "
                "time_zones_h in [0, 24]");
  }
}

double DiurnalAvailability::OnlineChance(int client, int64_t slot) const {
  const uint64_t k = static_cast<uint64_t>(client);
  const double offset_s =
      shape_.time_zones_h * 3600.0 * HashUniform01(seed_, Stream::kAvailability, {k, ~uint64_t{0}, 1});
  const double local_s = std::fmod(static_cast<double>(slot) * shape_.slot_s + offset_s, shape_.day_s);
  const double p = shape_.share * (1 + shape_.amplitude * std::cos(2 * M_PI * local_s / shape_.day_s));
  return std::clamp(p, 0.0, 1.0);
}

bool DiurnalAvailability::OnlineIn(int client, int64_t slot) const {
  const uint64_t k = static_cast<uint64_t>(client);
  const double u = HashUniform01(seed_, Stream::kAvailability, {k, static_cast<uint64_t>(slot), 1});
  return u < OnlineChance(client, slot);
}

Availability::State DiurnalAvailability::At(int client, double t) {
  // Runs end at every 65,536th slot at the latest: the answer depends on
  // the slot alone, not on which slot of a run was asked first (resume).
  constexpr int64_t kLongestRun = int64_t{1} << 16;
  Run& r = runs_.at(static_cast<size_t>(client));
  const int64_t slot = static_cast<int64_t>(std::floor(std::max(0.0, t) / shape_.slot_s));
  if (slot < r.first || slot >= r.end) {
    const int64_t limit = (slot / kLongestRun + 1) * kLongestRun;
    r.first = slot;
    r.online = OnlineIn(client, slot);
    r.end = slot + 1;
    while (r.end < limit && OnlineIn(client, r.end) == r.online) ++r.end;
  }
  return {r.online, static_cast<double>(r.end) * shape_.slot_s};
}

std::unique_ptr<Availability> MakeAvailability(const RunOptions::Availability& options, int64_t seed,
                                               int num_clients) {
  if (options.kind == "always") return nullptr;
  if (options.kind == "on_off") {
    return std::make_unique<OnOffAvailability>(num_clients, options.online_mean_s, options.offline_mean_s,
                                               static_cast<uint64_t>(seed));
  }
  if (options.kind == "diurnal") {
    const DiurnalShape shape{options.share, options.amplitude, options.time_zones_h, options.slot_s,
                             options.day_s};
    return std::make_unique<DiurnalAvailability>(num_clients, shape, static_cast<uint64_t>(seed));
  }
  if (options.kind == "trace") {
    if (options.trace.empty()) throw Error("availability.trace: availability.kind = trace needs a file");
    return std::make_unique<TraceAvailability>(
        ParseAvailabilityTrace(ReadFile(options.trace), options.trace, num_clients));
  }
  throw Error("availability.kind: '" + options.kind + "' is not one of always|on_off|diurnal|trace");
}

}  // namespace fedprof
