#include "fedprof/report/run_status.h"

#include <cstdint>
#include <cstdio>

namespace fedprof {
namespace {

std::string Number(const nlohmann::json& v, const char* format) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v.get<double>());
  return buf;
}

}  // namespace

std::string FormatRunDirStatus(const nlohmann::json& s) {
  std::string out = "run " + s["dir"].get<std::string>() + ": " + s["state"].get<std::string>() +
                    ", round " + std::to_string(s["round"].get<int64_t>()) + " of " +
                    std::to_string(s["rounds_planned"].get<int64_t>()) + " (" +
                    s["strategy"].get<std::string>() + ", seed " +
                    std::to_string(s["seed"].get<int64_t>()) + ")\n";
  if (s.contains("best_accuracy")) {
    out += "best accuracy " + Number(s["best_accuracy"], "%.4f") + " (round " +
           std::to_string(s["best_round"].get<int64_t>()) + "), last " +
           Number(s["last_accuracy"], "%.4f") + ", wall " + Number(s["wall_s"], "%.1f") + " s\n";
  }
  if (s["state"] == "not started") {
    // No round finished: nothing to resume; the same config starts again.
    const std::string dir = s["dir"].get<std::string>();
    out += "start again: fedprof simulate --config " + dir + "/config.toml --out " + dir +
           " (fedprof server for a deployment)\n";
  } else if (s["state"] != "finished") {
    out += "resume: fedprof simulate --resume " + s["dir"].get<std::string>() +
           " (continues with round " + std::to_string(s["resume_from_round"].get<int64_t>()) +
           "; fedprof server --resume for a deployment)\n";
  }
  return out;
}

std::string FormatMonitorStatus(const nlohmann::json& s) {
  auto str = [&](const char* key) {
    return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : std::string("-");
  };
  auto integer = [&](const nlohmann::json& v) {
    return v.is_number() ? std::to_string(v.get<int64_t>()) : std::string("-");
  };
  std::string out = str("mode") + " " + str("run_id") + ": " + str("state") + ", round " +
                    integer(s.value("round", nlohmann::json())) + " of " +
                    integer(s.value("rounds", nlohmann::json())) + "\n";
  out += "accuracy " + Number(s.value("accuracy", nlohmann::json()), "%.4f") + ", loss " +
         Number(s.value("loss", nlohmann::json()), "%.4f") + "\n";
  if (s.contains("clients") && s["clients"].is_object()) {
    const nlohmann::json& c = s["clients"];
    out += "clients " + integer(c.value("connected", nlohmann::json())) + " connected of " +
           integer(c.value("total", nlohmann::json()));
    if (c.contains("selected")) {
      out += "; last round " + integer(c["selected"]) + " selected, " + integer(c["returned"]) +
             " returned, " + integer(c["refused"]) + " refused, " + integer(c["timed_out"]) +
             " timed out";
    }
    out += "\n";
  }
  if (!str("last_error").empty() && str("last_error") != "-") out += "last error: " + str("last_error") + "\n";
  out += "config digest " + str("config_digest") + "\n";
  return out;
}

}  // namespace fedprof
