#include "fedprof/privacy/client_ledger.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

}  // namespace

ClientLedger::ClientLedger(std::string path, double delta, double budget)
    : path_(std::move(path)), delta_(delta), budget_(budget) {
  if (!(delta_ > 0 && delta_ < 1)) {
    throw Error("client ledger: delta " + FormatDouble(delta_) +
                " is not in (0, 1) (dp.delta, or 1/clients.count)");
  }
  if (!(budget_ >= 0)) throw Error("client ledger: a budget >= 0 (0: none)");
}

void ClientLedger::Load() const {
  loaded_ = true;
  if (path_.empty() || !FileExists(path_)) return;
  std::istringstream lines(ReadFile(path_));
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    try {
      made_.push_back(FromJson(json::parse(line)));
    } catch (const std::exception& e) {
      throw Error(path_ + " line " + std::to_string(number) +
                  ": not a contribution of this client's ledger (" + Printable(e.what(), 200) + ")");
    }
  }
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
  if (unnoised) {
    s.against_server = s.against_observers = std::numeric_limits<double>::infinity();
    return s;
  }
  s.against_server = DdgEpsilonUnsampled(releases, /*honest_only=*/true, delta_).epsilon;
  s.against_observers = DdgEpsilonUnsampled(releases, /*honest_only=*/false, delta_).epsilon;
  return s;
}

std::string ClientLedger::Take(const Contribution& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_) Load();
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
      return c.release ? "it would take this client's epsilon against the server to " +
                             FormatDouble(after.against_server, "%.4g") + ", past its budget of " +
                             FormatDouble(budget_) + " (dp.client_budget)"
                       : "an update without noise has no bound on what the server learns, and this client "
                         "keeps a budget (dp.client_budget = " +
                             FormatDouble(budget_) + ")";
    }
  }
  if (!path_.empty()) {
    json line = ToJson(c);
    line["delta"] = delta_;
    line["budget"] = budget_;
    AppendLine(path_, line.dump() + "\n", 0600);
  }
  made_.push_back(c);
  return "";
}

ClientLedger::Spent ClientLedger::spent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loaded_) Load();
  return SpentWith(nullptr);
}

std::string ClientLedger::Describe() const {
  const Spent s = spent();
  return std::to_string(s.contributions) + " contribution" + (s.contributions == 1 ? "" : "s") +
         ": epsilon " + FormatDouble(s.against_server, "%.4g") + " against the server" +
         (budget_ > 0 ? " (of its budget " + FormatDouble(budget_) + ")" : std::string()) + ", " +
         FormatDouble(s.against_observers, "%.4g") + " against observers of the models, at delta " +
         FormatDouble(delta_);
}

std::string ClientLedgerPath(const std::string& dir, int64_t id) {
  return dir + "/client-" + std::to_string(id) + ".ledger";
}

json ClientLedgerStatus(const std::string& path) {
  if (!FileExists(path)) throw Error(path + ": no such file");
  // The settings of its last line, read first: the rest is the ledger's own.
  double delta = 1e-5, budget = 0;
  std::istringstream lines(ReadFile(path));
  for (std::string line; std::getline(lines, line);) {
    try {
      const json j = json::parse(line);
      if (j.contains("delta")) delta = j.at("delta").get<double>();
      if (j.contains("budget")) budget = j.at("budget").get<double>();
    } catch (const std::exception&) {
      break;  // the ledger names the line below
    }
  }
  const ClientLedger ledger(path, delta, budget);
  const ClientLedger::Spent spent = ledger.spent();
  const auto number = [](double v) { return std::isinf(v) ? json("inf") : json(v); };
  json status = {{"ledger", path},
                 {"contributions", spent.contributions},
                 {"epsilon_server", number(spent.against_server)},
                 {"epsilon_observers", number(spent.against_observers)},
                 {"delta", delta},
                 {"budget", budget}};
  json runs = json::object();
  std::istringstream again(ReadFile(path));
  for (std::string line; std::getline(again, line);) {
    const json j = json::parse(line);
    runs[j.at("run").get<std::string>()].push_back(j.at("round"));
  }
  status["rounds_by_run"] = runs;
  return status;
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
      text(s.at("delta")) + "\n";
  for (const auto& [run, rounds] : s.at("rounds_by_run").items()) {
    out += "run " + run.substr(0, 16) + "...: rounds";
    for (const json& r : rounds) out += " " + std::to_string(r.get<int64_t>());
    out += "\n";
  }
  return out;
}

}  // namespace fedprof
