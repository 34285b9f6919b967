#include "fedprof/config/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

std::string Canonical(const OptionSpec& spec, const std::string& key, const std::string& value,
                      const std::string& origin) {
  const std::string where = "config key '" + key + "' (" + origin + ")";
  if (value.empty() && MayBeEmpty(spec)) return value;  // not set
  switch (spec.type) {
    case OptionType::kInt:
    case OptionType::kDouble: {
      errno = 0;
      char* end = nullptr;
      // + 0.0 turns -0 into 0: ToToml would write "-0", which TOML reads
      // back as the integer 0, and the config would not round-trip.
      const double v = std::strtod(value.c_str(), &end) + 0.0;
      if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
        throw Error(where + ": '" + Printable(value) + "' is not a number; expected " +
                    ValidValues(spec));
      }
      if (spec.type == OptionType::kInt && v != std::floor(v)) {
        throw Error(where + ": '" + Printable(value) + "' is not a whole number; expected " +
                    ValidValues(spec));
      }
      if (v < spec.min || v > spec.max) {
        throw Error(where + ": " + Printable(value) + " is out of range; expected " +
                    ValidValues(spec));
      }
      if (spec.type == OptionType::kInt) return std::to_string(static_cast<int64_t>(v));
      return CanonicalDouble(v);
    }
    case OptionType::kBool:
      if (value == "true" || value == "1") return "true";
      if (value == "false" || value == "0") return "false";
      throw Error(where + ": '" + Printable(value) + "' is not a boolean; expected true|false");
    case OptionType::kString: {
      // config.toml must hold every value as written (ToToml).
      if (const std::string why = TextProblem(value); !why.empty()) {
        throw Error(where + ": '" + Printable(value) + "': " + why);
      }
      if (!*spec.choices) return value;
      std::stringstream ss(Choices(spec));
      std::string c;
      while (std::getline(ss, c, '|')) {
        if (c == value) return value;
      }
      throw Error(where + ": '" + Printable(value) + "' is not one of " + ValidValues(spec));
    }
  }
  return value;
}

void Flatten(const toml::table& table, const std::string& prefix, const std::string& origin,
             Config& config) {
  for (const auto& [k, node] : table) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    const auto& src = node.source();
    const std::string where = origin + ":" + std::to_string(src.begin.line);
    if (const toml::table* sub = node.as_table()) {
      Flatten(*sub, key, origin, config);
    } else if (auto s = node.value<std::string>(); s && node.is_string()) {
      config.Set(key, *s, where);
    } else if (node.is_integer()) {
      config.Set(key, std::to_string(*node.value<int64_t>()), where);
    } else if (node.is_floating_point()) {
      std::ostringstream ss;
      ss.precision(17);
      ss << *node.value<double>();
      config.Set(key, ss.str(), where);
    } else if (node.is_boolean()) {
      config.Set(key, *node.value<bool>() ? "true" : "false", where);
    } else {
      throw Error("config key '" + Printable(key) + "' (" + where +
                  "): unsupported value type; expected a number, string or boolean");
    }
  }
}

}  // namespace

Config::Config() {
  for (const auto& o : AllOptions()) {
    values_[o.name] = Canonical(o, o.name, o.default_value, "default");
    o.bind(values_[o.name], &options_);
  }
}

void Config::Set(const std::string& key, const std::string& value, const std::string& origin) {
  const OptionSpec* spec = FindOption(key);
  if (spec == nullptr) {
    throw Error("config key '" + Printable(key) + "' (" + Printable(origin) +
                ") is unknown; did you mean '" + NearestOption(key) + "'?");
  }
  std::string canonical = Canonical(*spec, key, value, origin);
  spec->bind(canonical, &options_);
  values_[key] = std::move(canonical);
}

std::string Config::Value(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    throw Error("config key '" + Printable(key) + "' is unknown; did you mean '" + NearestOption(key) + "'?");
  }
  return it->second;
}

void Config::SetAssignment(const std::string& assignment, const std::string& origin) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error(origin + " '" + Printable(assignment) + "': expected key=value");
  }
  Set(assignment.substr(0, eq), assignment.substr(eq + 1), origin);
}

void Config::MergeTomlString(const std::string& text, const std::string& origin) {
  toml::table table;
  try {
    table = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw Error(origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " +
                Printable(std::string(e.description()), 200));
  }
  Flatten(table, "", origin, *this);
}

Config Config::Load(const std::string& path, const std::vector<std::string>& assignments,
                    const std::string& origin) {
  Config config;
  if (!path.empty()) config.MergeTomlFile(path);
  for (const std::string& a : assignments) config.SetAssignment(a, origin);
  return config;
}

void Config::MergeTomlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  MergeTomlString(ss.str(), path);
}

std::string Config::Fingerprint() const {
  // Length-prefixed values: no two configs serialise alike.
  std::string text = "fedprof config fingerprint 1\n";
  for (const auto& [name, value] : values_) {
    if (MayChangeOnResume(name)) continue;
    text += name + "=" + std::to_string(value.size()) + ":" + value + "\n";
  }
  return Sha256Hex(text);
}

std::string Config::ToToml() const {
  // Top-level keys first, then one table per section, in table order.
  std::ostringstream out;
  std::string section;
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + "\"";
  };
  for (const auto& o : AllOptions()) {
    const std::string name = o.name;
    const auto dot = name.find('.');
    const std::string sec = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string key = dot == std::string::npos ? name : name.substr(dot + 1);
    if (sec != section) {
      out << "\n[" << sec << "]\n";
      section = sec;
    }
    const std::string& v = values_.at(name);
    // An empty value (an option left unset) is written as "" whatever its type.
    out << key << " = " << (o.type == OptionType::kString || v.empty() ? quote(v) : v) << "\n";
  }
  return out.str();
}

}  // namespace fedprof
