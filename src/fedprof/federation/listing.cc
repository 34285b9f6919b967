#include "fedprof/federation/listing.h"

#include <algorithm>
#include <cmath>

#include "fedprof/core/text.h"

namespace fedprof::federation {

using nlohmann::json;

json RunJson(const pb::RunInfo& r) {
  json refusals = json::array();
  for (const auto& f : r.refusals()) refusals.push_back({{"node", f.node()}, {"rule", f.rule()}, {"at", f.at()}});
  json j = {{"run", r.run()},           {"name", r.name()},
            {"state", r.state()},       {"detail", r.detail()},
            {"strategy", r.strategy()}, {"rounds", r.rounds()},
            {"rounds_done", r.rounds_done()},
            {"submitted_by", r.submitted_by()}, {"submitted_at", r.submitted_at()},
            {"started_at", r.started_at()},     {"finished_at", r.finished_at()},
            {"address", r.address()},           {"nodes", json(std::vector<int>(r.nodes().begin(), r.nodes().end()))},
            {"refusals", refusals}};
  j["accuracy"] = std::isnan(r.accuracy()) ? json(nullptr) : json(r.accuracy());
  return j;
}

json NodeJson(const pb::NodeInfo& n) {
  return {{"id", n.id()},
          {"state", n.state()},
          {"connected", n.connected()},
          {"last_seen", n.last_seen()},
          {"version", n.version()},
          {"build", n.build()},
          {"cert_sha256", n.cert_sha256()},
          {"cert_expires", n.cert_expires()},
          {"runs_served", n.runs_served()},
          {"serving", json(std::vector<int64_t>(n.serving().begin(), n.serving().end()))},
          {"enrolled_by", n.enrolled_by()},
          {"enrolled_at", n.enrolled_at()},
          {"revoked_by", n.revoked_by()},
          {"revoked_at", n.revoked_at()}};
}

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += Printable(line, 2000) + "\n";
  }
  return out;
}

namespace {

std::string Text(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string Numbers(const json& list, const char* separator) {
  std::string out;
  for (const json& n : list) out += (out.empty() ? "" : separator) + n.dump();
  return out;
}

}  // namespace

std::string FormatRuns(const json& runs) {
  std::vector<std::vector<std::string>> rows = {
      {"RUN", "NAME", "STATE", "STRATEGY", "ROUND", "ACCURACY", "SUBMITTED BY", "SUBMITTED AT", "DETAIL"}};
  for (const json& r : runs) {
    const json& accuracy = r.at("accuracy");
    rows.push_back({Text(r, "run"), Text(r, "name"), Text(r, "state"), Text(r, "strategy"),
                    Text(r, "rounds_done") + "/" + Text(r, "rounds"),
                    accuracy.is_number() ? FormatDouble(accuracy.get<double>(), "%.3f") : "-",
                    Text(r, "submitted_by"), Text(r, "submitted_at"), Text(r, "detail")});
  }
  return FormatTable(rows);
}

std::string FormatRun(const json& run) {
  std::string out = FormatRuns(json::array({run}));
  if (!Text(run, "address").empty()) out += "server: " + Printable(Text(run, "address"), 300) + "\n";
  const std::string nodes = Numbers(run.at("nodes"), ", ");
  out += "nodes that served it: " + (nodes.empty() ? std::string("none yet") : nodes) + "\n";
  for (const json& f : run.at("refusals")) {
    out += "refused by node " + Text(f, "node") + " at " + Printable(Text(f, "at"), 40) + ": " +
           Printable(Text(f, "rule"), 1000) + "\n";
  }
  return out;
}

std::string FormatNodes(const json& nodes) {
  std::vector<std::vector<std::string>> rows = {
      {"NODE", "STATE", "CONNECTED", "LAST SEEN", "VERSION", "BUILD", "CERT EXPIRES", "RUNS SERVED", "SERVING"}};
  for (const json& n : nodes) {
    const std::string serving = Numbers(n.at("serving"), ",");
    rows.push_back({Text(n, "id"), Text(n, "state"), n.at("connected").get<bool>() ? "yes" : "no",
                    Text(n, "last_seen").empty() ? "never" : Text(n, "last_seen"), Text(n, "version"),
                    Text(n, "build"), Text(n, "cert_expires"), Text(n, "runs_served"),
                    serving.empty() ? "-" : serving});
  }
  return FormatTable(rows);
}

}  // namespace fedprof::federation
