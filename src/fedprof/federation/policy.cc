#include "fedprof/federation/policy.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <sstream>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/privacy/rdp.h"

namespace fedprof::federation {
namespace {

// A TOML value as the text --set would give it.
std::string TextOf(const toml::node& node, const std::string& where) {
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* d = node.as_floating_point()) return FormatDouble(d->get(), "%.17g");
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  throw Error(where + ": a string, number or true/false");
}

double NumberOf(const toml::node& node, const std::string& where) {
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  if (const auto* d = node.as_floating_point()) return d->get();
  throw Error(where + ": a number");
}

const OptionSpec& OptionNamed(const std::string& key, const std::string& where) {
  const OptionSpec* spec = FindOption(key);
  if (spec == nullptr) {
    throw Error(where + ": '" + Printable(key) + "' is no option; did you mean '" + NearestOption(key) + "'?");
  }
  return *spec;
}

std::string Joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return "[" + out + "]";
}

// [paths] read = ["/a/directory", ...].
void ReadPaths(const std::string& key, const toml::node& value, const std::string& at, NodePolicy* policy) {
  const toml::array* dirs = value.as_array();
  if (key != "read" || dirs == nullptr) throw Error(at + ": [paths] holds read = [\"/a/directory\", ...]");
  for (const toml::node& dir : *dirs) {
    const auto* text = dir.as_string();
    if (text == nullptr || text->get().empty() || text->get()[0] != '/') {
      throw Error(at + ": a directory, as an absolute path");
    }
    policy->read_roots.push_back(text->get());
  }
}

// [client] "option" = value, of NodeOwnOptions() only.
void ReadClientOption(const OptionSpec& spec, const toml::node& value, const std::string& at, NodePolicy* policy) {
  const std::vector<std::string>& own = NodeOwnOptions();
  if (std::find(own.begin(), own.end(), spec.name) == own.end()) {
    throw Error(at + ": not one of a node's own options (" + Joined(own) + ")");
  }
  Config scratch;
  scratch.Set(spec.name, TextOf(value, at), at);
  policy->own[spec.name] = scratch.Value(spec.name);
}

}  // namespace

NodePolicy LoadPolicy(const std::string& path) {
  NodePolicy policy;
  policy.file = path;
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    throw Error(path + ": " + where.str() + ": " + std::string(e.description()));
  }
  for (const auto& [section_key, section_node] : table) {
    const std::string section(section_key.str());
    const std::string where = path + ": [" + section + "]";
    const toml::table* rules = section_node.as_table();
    if (rules == nullptr) throw Error(path + ": '" + Printable(section) + "' is not a table of rules");
    for (const auto& [key_node, value] : *rules) {
      const std::string key(key_node.str());
      const std::string at = where + " " + Printable(key);
      if (section == "allow") {
        const OptionSpec& spec = OptionNamed(key, where);
        const toml::array* values = value.as_array();
        if (values == nullptr || values->empty()) throw Error(at + ": a list of the values allowed");
        for (const toml::node& v : *values) {
          // The canonical text the run's config holds, checked as --set checks it.
          Config scratch;
          scratch.Set(spec.name, TextOf(v, at), at);
          policy.allow[key].push_back(scratch.Value(key));
        }
      } else if (section == "at_least" || section == "at_most") {
        const OptionSpec& spec = OptionNamed(key, where);
        if (spec.type != OptionType::kInt && spec.type != OptionType::kDouble) {
          throw Error(at + ": not a numeric option");
        }
        (section == "at_least" ? policy.at_least : policy.at_most)[key] = NumberOf(value, at);
      } else if (section == "limits") {
        const double number = NumberOf(value, at);
        if (key == "min_cohort") {
          if (number < 0 || number != std::floor(number)) throw Error(at + ": a whole number of clients");
          policy.min_cohort = static_cast<int64_t>(number);
        } else if (key == "max_epsilon") {
          if (!(number > 0)) throw Error(at + ": an epsilon above 0");
          policy.max_epsilon = number;
        } else if (key == "rounds_per_day") {
          if (number < 1 || number > 1e9 || number != std::floor(number)) {
            throw Error(at + ": a whole number of rounds, at least 1");
          }
          policy.rounds_per_day = static_cast<int64_t>(number);
        } else {
          throw Error(at + ": no such limit (min_cohort, max_epsilon, rounds_per_day)");
        }
      } else if (section == "paths") {
        ReadPaths(key, value, at, &policy);
      } else if (section == "client") {
        ReadClientOption(OptionNamed(key, where), value, at, &policy);
      } else {
        throw Error(path + ": [" + Printable(section) +
                    "] is no table of a policy (allow, at_least, at_most, limits, paths, client)");
      }
    }
  }
  const auto budget = policy.own.find("dp.client_budget"), unbounded = policy.own.find("dp.client_unbounded");
  if (budget != policy.own.end() && unbounded != policy.own.end() && std::strtod(budget->second.c_str(), nullptr) > 0 &&
      unbounded->second == "true") {
    throw Error(path + ": [client] dp.client_budget and dp.client_unbounded = true: a budget, or none, not both");
  }
  return policy;
}

const std::vector<std::string>& NodeOwnOptions() {
  static const std::vector<std::string> options = {"dp.client_budget", "dp.client_unbounded", "dp.delta",
                                                   "secagg.client_reports"};
  return options;
}

Config NodeClientConfig(const NodePolicy& policy, Config run) {
  const bool distributed = run.options().dp.mode == "distributed";
  for (const std::string& option : NodeOwnOptions()) {
    const auto own = policy.own.find(option);
    const bool budget = option.rfind("dp.", 0) == 0;
    // The ledger's delta is fixed by the node, never 1/clients.count of a
    // run's choosing: a larger one would price its past spending lower.
    const std::string fallback = option == "dp.delta" ? kNodeDelta : FindOption(option)->default_value;
    const std::string value = own != policy.own.end() && (distributed || !budget) ? own->second : fallback;
    run.Set(option, value, "this node's policy");
  }
  run.Set("dp.key_dir", "", "this node");
  return run;
}

double EpsilonAgainstTheServer(const Config& run) {
  const RunOptions& o = run.options();
  if (o.dp.mode != "distributed" || !(o.dp.noise_multiplier > 0)) return std::numeric_limits<double>::infinity();
  const double delta = o.dp.delta > 0 ? o.dp.delta : 1.0 / static_cast<double>(o.clients.count);
  return SampledGaussianEpsilon(1.0, o.dp.noise_multiplier, o.rounds, delta).epsilon;
}

std::string PolicyRefusal(const NodePolicy& policy, const Config& run) {
  for (const auto& [key, allowed] : policy.allow) {
    const std::string value = run.Value(key);
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      return "policy allow \"" + key + "\" = " + Joined(allowed) + ": the run has " +
             (value.empty() ? "none" : Printable(value, 80));
    }
  }
  for (const auto& [key, bound] : policy.at_least) {
    const double value = std::strtod(run.Value(key).c_str(), nullptr);
    if (!(value >= bound)) {
      return "policy at_least \"" + key + "\" = " + FormatDouble(bound) + ": the run has " + FormatDouble(value);
    }
  }
  for (const auto& [key, bound] : policy.at_most) {
    const double value = std::strtod(run.Value(key).c_str(), nullptr);
    if (!(value <= bound)) {
      return "policy at_most \"" + key + "\" = " + FormatDouble(bound) + ": the run has " + FormatDouble(value);
    }
  }
  const RunOptions& o = run.options();
  if (policy.min_cohort > 0) {
    const int64_t cohort = std::max<int64_t>(
        1, std::llround(o.strategy.fraction * static_cast<double>(o.clients.count)));
    if (cohort < policy.min_cohort) {
      return "policy limits min_cohort = " + std::to_string(policy.min_cohort) + ": the run asks " +
             std::to_string(cohort) + " clients a round";
    }
  }
  if (policy.max_epsilon > 0) {
    const double epsilon = EpsilonAgainstTheServer(run);
    if (!(epsilon <= policy.max_epsilon)) {
      return "policy limits max_epsilon = " + FormatDouble(policy.max_epsilon) +
             ": the run's epsilon against the server is " +
             (std::isinf(epsilon) ? std::string("infinite (no distributed DP)") : FormatDouble(epsilon, "%.3g"));
    }
  }
  return "";
}

std::string RoundsPerDay::Take(int id, const std::string& day) {
  const std::string today = day.empty() ? FormatUtc(std::time(nullptr), "%Y-%m-%d") : day;
  const std::string file = dir_ + "/client-" + std::to_string(id) + ".rounds";
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t taken = 0;
  if (FileExists(file)) {
    std::istringstream in(ReadFile(file));
    std::string on;
    int64_t n = -1;
    if (!(in >> on >> n) || n < 0 || on.size() != 10) {
      return "policy limits rounds_per_day: " + file + " is not \"YYYY-MM-DD N\"; mend or remove it";
    }
    if (on == today) taken = n;
  }
  if (taken >= per_day_) {
    return "policy limits rounds_per_day = " + std::to_string(per_day_) + ": client " + std::to_string(id) +
           " has trained " + std::to_string(taken) + " rounds on " + today + " (UTC)";
  }
  try {
    WriteFileAtomic(file, today + " " + std::to_string(taken + 1) + "\n");
  } catch (const std::exception& e) {
    return "policy limits rounds_per_day: cannot count the round in " + file + ": " + e.what();
  }
  return "";
}

}  // namespace fedprof::federation
