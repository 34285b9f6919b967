#ifndef FEDPROF_CONFIG_CONFIG_H_
#define FEDPROF_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"

namespace fedprof {

// A complete, validated set of option values: every option of AllOptions()
// has a value (its default unless set), as text (for config.toml and the
// fingerprint) and bound to its typed field (options()). Every setter
// validates and throws fedprof::Error naming the key, the value and what was
// expected; an unknown key names the nearest valid one.
class Config {
 public:
  Config();  // all defaults
  // The defaults, then the TOML file at `path` (none when empty), then each
  // "key=value" of `assignments` in order: what --config and --set give.
  static Config Load(const std::string& path, const std::vector<std::string>& assignments,
                     const std::string& origin = "--set");

  // Merges a TOML file; [section] key = value sets "section.key".
  void MergeTomlFile(const std::string& path);
  void MergeTomlString(const std::string& text, const std::string& origin);
  // "key=value" as given to --set; `origin` names where it came from in
  // error messages.
  void SetAssignment(const std::string& assignment, const std::string& origin = "--set");
  void Set(const std::string& key, const std::string& value, const std::string& origin = "--set");

  // Every option's value in its typed field: what the rest of the code reads.
  const RunOptions& options() const { return options_; }
  // Option `key`'s value as canonical text; throws fedprof::Error for a key
  // that is no option.
  std::string Value(const std::string& key) const;

  // The resolved config as TOML (every option, grouped by section), which
  // MergeTomlString reads back to an equal Config.
  std::string ToToml() const;

  // SHA-256 (hex) of every option that may not change on resume
  // (OptionSpec::resumable): two configs that give the same rounds have the
  // same fingerprint. Checkpoints store it; a resume checks it.
  std::string Fingerprint() const;

  bool operator==(const Config& other) const { return values_ == other.values_; }

 private:
  std::map<std::string, std::string> values_;  // canonical text per option
  RunOptions options_;                         // the same values, typed
};

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_CONFIG_H_
