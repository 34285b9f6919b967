#include "fedprof/privacy/client_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

using json = nlohmann::json;

std::string Short(const std::string& bytes) { return HexEncode(bytes).substr(0, 16) + "..."; }

json ToJson(const Contribution& c) {
  json j = {
      {"run", HexEncode(c.run)}, {"round", c.round}, {"session", HexEncode(c.session)}, {"task", c.task}};
  if (c.release) {
    const DdgParams& p = c.release->encoding;
    j["dp"] = {{"clip_norm", p.clip_norm},         {"noise_sd", p.noise_sd},
               {"granularity", p.granularity},     {"bits", p.bits},
               {"rounding_beta", p.rounding_beta}, {"dim", p.dim},
               {"clients", c.release->clients},    {"honest", c.release->honest}};
  }
  return j;
}

Contribution FromJson(const json& j) {
  Contribution c;
  c.run = HexDecode(j.at("run").get<std::string>());
  c.round = j.at("round").get<int64_t>();
  c.session = HexDecode(j.at("session").get<std::string>());
  c.task = j.at("task").get<std::string>();
  if (c.run.size() != 32 || c.session.size() != 32 || c.task.size() != 64) {
    throw Error("a run, session or task id of the wrong size");
  }
  if (j.contains("dp")) {
    const json& d = j.at("dp");
    DdgRelease r;
    r.encoding.clip_norm = d.at("clip_norm").get<double>();
    r.encoding.noise_sd = d.at("noise_sd").get<double>();
    r.encoding.granularity = d.at("granularity").get<double>();
    r.encoding.bits = d.at("bits").get<int>();
    r.encoding.rounding_beta = d.at("rounding_beta").get<double>();
    r.encoding.dim = d.at("dim").get<size_t>();
    r.clients = d.at("clients").get<int64_t>();
    r.honest = d.at("honest").get<int64_t>();
    CheckDdgParams(r.encoding);
    if (r.clients < 1 || r.honest < 0 || r.honest > r.clients) throw Error("a sum of impossible counts");
    c.release = r;
  }
  return c;
}

json ReportToJson(const ReportAnswer& r) {
  return {{"report", r.asked}, {"run", HexEncode(r.run)}, {"round", r.round}};
}

ReportAnswer ReportFromJson(const json& j) {
  ReportAnswer r;
  r.asked = j.at("report").get<std::string>();
  r.run = HexDecode(j.at("run").get<std::string>());
  r.round = j.at("round").get<int64_t>();
  if (!r.run.empty() && r.run.size() != 32) throw Error("a report's run id of the wrong size");
  return r;
}

}  // namespace

ClientLedger::ClientLedger(std::string path, double delta, double budget, ReportLimits reports)
    : path_(std::move(path)), delta_(delta), budget_(budget), report_limits_(reports) {
  if (!(delta_ > 0 && delta_ < 1)) {
    throw Error("client ledger: delta " + FormatDouble(delta_) +
                " is not in (0, 1) (dp.delta, or 1/clients.count)");
  }
  if (!(budget_ >= 0)) throw Error("client ledger: a budget >= 0 (0: none)");
  if (reports.per_run < 0 || reports.total < 0) throw Error("client ledger: report limits >= 0 (0: none)");
}

void ClientLedger::Parse(const std::string& text) const {
  made_.clear();
  reported_.clear();
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    try {
      const json j = json::parse(line);
      if (j.contains("report")) {
        reported_.push_back(ReportFromJson(j));
      } else {
        made_.push_back(FromJson(j));
      }
    } catch (const std::exception& e) {
      // A last line cut short by a crash: what it began was never sent (it
      // is recorded before the first message), so it counts for nothing.
      if (lines.eof() && !text.empty() && text.back() != '\n') break;
      throw Error(path_ + " line " + std::to_string(number) +
                  ": not a line of this client's ledger (" + Printable(e.what(), 200) + ")");
    }
  }
}

void ClientLedger::Load() const {
  loaded_ = true;
  if (path_.empty() || !FileExists(path_)) return;
  Parse(ReadFile(path_));
}

ClientLedger::Spent ClientLedger::SpentWith(const Contribution* more) const {
  Spent s;
  std::vector<DdgRelease> releases;
  bool unnoised = false;
  const auto add = [&](const Contribution& c) {
    ++s.contributions;
    if (c.release) {
      releases.push_back(*c.release);
    } else {
      unnoised = true;
    }
  };
  for (const Contribution& c : made_) add(c);
  if (more != nullptr) add(*more);
  s.reports = static_cast<int64_t>(reported_.size());
  if (unnoised) {
    s.against_server = s.against_observers = std::numeric_limits<double>::infinity();
    return s;
  }
  s.against_server = DdgEpsilonUnsampled(releases, /*honest_only=*/true, delta_).epsilon;
  s.against_observers = DdgEpsilonUnsampled(releases, /*honest_only=*/false, delta_).epsilon;
  return s;
}

namespace {

// The ledger file, open and locked against every other process of the
// client (two processes of one id would otherwise both take a task).
class LockedFile {
 public:
  explicit LockedFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      const int error = errno;
      if (fd_ >= 0) ::close(fd_);
      throw Error(path + ": cannot be opened and locked: " + std::strerror(error));
    }
  }
  ~LockedFile() { ::close(fd_); }  // and with it the lock
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  std::string Contents() const {
    std::string text;
    char buffer[65536];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buffer, sizeof(buffer), at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(path_ + ": cannot be read: " + std::strerror(errno));
      if (n == 0) return text;
      text.append(buffer, static_cast<size_t>(n));
      at += n;
    }
  }

  // Drops what follows the last whole line (a line cut short by a crash),
  // so that the next line starts a line of its own.
  void DropTornTail(const std::string& contents) const {
    if (contents.empty() || contents.back() == '\n') return;
    const size_t whole = contents.rfind('\n') == std::string::npos ? 0 : contents.rfind('\n') + 1;
    if (::ftruncate(fd_, static_cast<off_t>(whole)) != 0) {
      throw Error(path_ + ": cannot drop its torn last line: " + std::strerror(errno));
    }
  }

  // One write of one whole line, flushed to disk.
  void Append(const std::string& line) const {
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()) || ::fsync(fd_) != 0) {
      throw Error(path_ + ": cannot record the contribution: " + std::strerror(errno));
    }
  }

 private:
  const std::string path_;
  int fd_ = -1;
};

}  // namespace

std::string ClientLedger::Record(const std::function<std::string(json* line)>& decide) {
  std::unique_ptr<LockedFile> file;
  if (path_.empty()) {
    if (!loaded_) Load();
  } else {
    // What every process of this client has recorded, read under the lock.
    file = std::make_unique<LockedFile>(path_);
    const std::string contents = file->Contents();
    Parse(contents);
    loaded_ = true;
    file->DropTornTail(contents);
  }
  json line;
  const std::string refused = decide(&line);
  if (refused.empty() && file) file->Append(line.dump() + "\n");
  return refused;
}

std::string ClientLedger::Take(const Contribution& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  return Record([&](json* line) { return Decide(c, line); });
}

std::string ClientLedger::Decide(const Contribution& c, json* line) {
  int64_t latest = -1;  // the latest round of c's run contributed to
  for (const Contribution& m : made_) {
    if (m.session == c.session) {
      return "secure aggregation session " + Short(c.session) +
             " was joined before: a server replaying a session";
    }
    if (m.task == c.task) {
      return "task " + c.task.substr(0, 16) +
             "... (its model and training) was contributed to before, in round " + std::to_string(m.round) +
             " of run " + Short(m.run) + ": a server replaying a task";
    }
    if (m.run == c.run) latest = std::max(latest, m.round);
  }
  if (latest >= c.round) {
    return "round " + std::to_string(c.round) + " of run " + Short(c.run) +
           (latest == c.round ? " was contributed to before: a server running a round again"
                              : ": this client contributed to round " + std::to_string(latest) +
                                    " of that run already (a run going back)");
  }
  if (budget_ > 0) {
    const Spent after = SpentWith(&c);
    if (!(after.against_server <= budget_)) {
      return c.release ? "it would take this client past its privacy budget (dp.client_budget)"
                       : "an update without noise has no bound on what the server learns, and this client "
                         "keeps a privacy budget (dp.client_budget)";
    }
  }
  *line = ToJson(c);
  (*line)["delta"] = delta_;
  (*line)["budget"] = budget_;
  made_.push_back(c);
  return "";
}

std::string ClientLedger::TakeReport(const ReportAnswer& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  return Record([&](json* line) -> std::string {
    const auto in_run = std::count_if(reported_.begin(), reported_.end(),
                                      [&](const ReportAnswer& m) { return m.run == r.run; });
    if (report_limits_.per_run > 0 && in_run >= report_limits_.per_run) {
      return "this client has answered the most reports it answers in one run";
    }
    if (report_limits_.total > 0 && static_cast<int64_t>(reported_.size()) >= report_limits_.total) {
      return "this client has answered the most reports it answers over every run (secagg.client_reports)";
    }
    *line = ReportToJson(r);
    reported_.push_back(r);
    return "";
  });
}

ClientLedger::Spent ClientLedger::spent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_ || !path_.empty()) Load();  // a file: as every process of the client left it
  return SpentWith(nullptr);
}

std::string ClientLedger::Describe() const {
  const Spent s = spent();
  return std::to_string(s.contributions) + " contribution" + (s.contributions == 1 ? "" : "s") +
         ": epsilon " + FormatDouble(s.against_server, "%.4g") + " against the server" +
         (budget_ > 0 ? " (of its budget " + FormatDouble(budget_) + ")" : std::string()) + ", " +
         FormatDouble(s.against_observers, "%.4g") + " against observers of the models, at delta " +
         FormatDouble(delta_) + "; " + std::to_string(s.reports) + " report" + (s.reports == 1 ? "" : "s");
}

double DeployedClientBudget(const RunOptions::Dp& dp) {
  if (dp.mode != "distributed" || dp.client_unbounded) return dp.client_budget;
  return dp.client_budget > 0 ? dp.client_budget : kDefaultClientBudget;
}

std::string ClientLedgerPath(const std::string& dir, int64_t id) {
  return dir + "/client-" + std::to_string(id) + ".ledger";
}

json ClientLedgerStatus(const std::string& path) {
  if (!FileExists(path)) throw Error(path + ": no such file");
  // Its rounds by run, and the settings of its last line; the ledger itself
  // checks every line (spent() below).
  double delta = 1e-5, budget = 0;
  json runs = json::object();
  std::istringstream lines(ReadFile(path));
  for (std::string line; std::getline(lines, line);) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("run") || !j.contains("round") || j.contains("report")) continue;
    runs[j.at("run").get<std::string>()].push_back(j.at("round"));
    if (j.contains("delta")) delta = j.at("delta").get<double>();
    if (j.contains("budget")) budget = j.at("budget").get<double>();
  }
  const ClientLedger::Spent spent = ClientLedger(path, delta, budget).spent();
  const auto number = [](double v) { return std::isinf(v) ? json("inf") : json(v); };
  return {{"ledger", path},
          {"contributions", spent.contributions},
          {"epsilon_server", number(spent.against_server)},
          {"epsilon_observers", number(spent.against_observers)},
          {"reports", spent.reports},
          {"delta", delta},
          {"budget", budget},
          {"rounds_by_run", runs}};
}

std::string FormatClientLedgerStatus(const json& s) {
  const auto text = [](const json& v) {
    return v.is_string() ? v.get<std::string>() : FormatDouble(v.get<double>(), "%.4g");
  };
  std::string out =
      s.at("ledger").get<std::string>() + ": " + std::to_string(s.at("contributions").get<int64_t>()) +
      " contributions to secure sums, in " + std::to_string(s.at("rounds_by_run").size()) +
      " runs\nepsilon against the server " + text(s.at("epsilon_server")) +
      (s.at("budget").get<double>() > 0 ? " of its budget " + text(s.at("budget")) : std::string()) +
      ", against observers of the models " + text(s.at("epsilon_observers")) + ", at delta " +
      text(s.at("delta")) + "\n" + std::to_string(s.value("reports", int64_t{0})) +
      " reports answered outside any sum\n";
  for (const auto& [run, rounds] : s.at("rounds_by_run").items()) {
    out += "run " + run.substr(0, 16) + "...: rounds";
    for (const json& r : rounds) out += " " + std::to_string(r.get<int64_t>());
    out += "\n";
  }
  return out;
}

}  // namespace fedprof
