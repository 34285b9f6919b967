#ifndef FEDPROF_CONFIG_OPTIONS_H_
#define FEDPROF_CONFIG_OPTIONS_H_

#include <string>
#include <vector>

namespace fedprof {

enum class OptionType { kInt, kDouble, kBool, kString };

// One config option. The table returned by AllOptions() is the single source
// of truth: parsing, validation, `fedprof options` and docs/options.md all
// come from it.
struct OptionSpec {
  const char* name;           // dotted key, "section.key" = [section] key in TOML
  OptionType type;
  const char* default_value;  // canonical text form
  double min;                 // numeric options: inclusive range
  double max;
  const char* choices;        // string options: "a|b|c", or "" for free text
  const char* description;
};

const std::vector<OptionSpec>& AllOptions();

// nullptr when `name` is not an option.
const OptionSpec* FindOption(const std::string& name);

// The option name closest to `name` by edit distance (for "did you mean").
std::string NearestOption(const std::string& name);

// Whether the option may be left empty, meaning "not set": those whose
// default is empty (numeric and choice options included).
bool MayBeEmpty(const OptionSpec& option);

// "[min, max]", "a|b|c", "true|false" or "text", with " or empty" when the
// option may be empty.
std::string ValidValues(const OptionSpec& option);

// Options a resumed run may change (--resume with --set): they change how
// far or how a run proceeds (rounds, threads, report.progress, deploy.*),
// never the numbers of its rounds. Every other option is part of
// Config::Fingerprint(), which a checkpoint must match.
bool MayChangeOnResume(const std::string& name);

// The table as Markdown (name, type, default, valid values, description).
std::string OptionsMarkdown();

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_OPTIONS_H_
