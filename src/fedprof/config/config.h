#ifndef FEDPROF_CONFIG_CONFIG_H_
#define FEDPROF_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fedprof {

// A complete, validated set of option values: every option of AllOptions()
// has a value (its default unless set). Every setter validates and throws
// fedprof::Error naming the key, the value and what was expected; an unknown
// key names the nearest valid one.
class Config {
 public:
  Config();  // all defaults

  // Merges a TOML file; [section] key = value sets "section.key".
  void MergeTomlFile(const std::string& path);
  void MergeTomlString(const std::string& text, const std::string& origin);
  // "key=value" as given to --set.
  void SetAssignment(const std::string& assignment);
  void Set(const std::string& key, const std::string& value, const std::string& origin = "--set");

  int64_t GetInt(const std::string& key) const;
  double GetDouble(const std::string& key) const;
  bool GetBool(const std::string& key) const;
  const std::string& GetString(const std::string& key) const;
  // Whether the option is left empty ("not set"), which options with an
  // empty default allow; GetInt and GetDouble throw fedprof::Error on one.
  bool IsEmpty(const std::string& key) const;

  // The resolved config as TOML (every option, grouped by section), which
  // MergeTomlString reads back to an equal Config.
  std::string ToToml() const;

  // SHA-256 (hex) of every option that may not change on resume
  // (MayChangeOnResume): two configs that give the same rounds have the
  // same fingerprint. Checkpoints store it; a resume checks it.
  std::string Fingerprint() const;

  bool operator==(const Config& other) const { return values_ == other.values_; }

 private:
  const std::string& Raw(const std::string& key) const;
  std::map<std::string, std::string> values_;  // canonical text per option
};

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_CONFIG_H_
