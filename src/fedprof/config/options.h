#ifndef FEDPROF_CONFIG_OPTIONS_H_
#define FEDPROF_CONFIG_OPTIONS_H_

#include <functional>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"

namespace fedprof {

enum class OptionType { kInt, kDouble, kBool, kString };

// One config option. The table returned by AllOptions() is the single source
// of truth: parsing, validation, the typed field each option fills
// (RunOptions), which options a resume may change, `fedprof options` and
// docs/options.md all come from it.
struct OptionSpec {
  const char* name;           // dotted key, "section.key" = [section] key in TOML
  OptionType type;            // the type of its field
  const char* default_value;  // canonical text form
  double min;                 // numeric options: inclusive range
  double max;
  const char* choices;        // string options: "a|b|c", or "" for free text
  const char* description;
  // Whether a resumed run may change it (--resume with --set): options that
  // change how far or how a run proceeds, never the numbers of its rounds.
  // Every other option is part of Config::Fingerprint().
  bool resumable = false;
  // Writes a validated value (canonical text; "" = not set) into its field,
  // and reads it back as canonical text.
  std::function<void(const std::string& text, RunOptions* options)> bind;
  std::function<std::string(const RunOptions& options)> read;
};

const std::vector<OptionSpec>& AllOptions();

// nullptr when `name` is not an option.
const OptionSpec* FindOption(const std::string& name);

// The option name closest to `name` by edit distance (for "did you mean").
std::string NearestOption(const std::string& name);

// Whether the option may be left empty, meaning "not set": those whose
// default is empty (numeric and choice options included).
bool MayBeEmpty(const OptionSpec& option);

// A value a string option with choices accepts besides its own: the name of
// a selector or aggregator registered from outside the engine
// (strategy/registry.h), for as long as it stays registered. Thread-safe.
void AddChoice(const std::string& option, const std::string& value);
void RemoveChoice(const std::string& option, const std::string& value);
// A string option's choices, "a|b|c" (its own, then the added ones), or ""
// when it takes any text.
std::string Choices(const OptionSpec& option);

// "[min, max]", "a|b|c", "true|false" or "text", with " or empty" when the
// option may be empty.
std::string ValidValues(const OptionSpec& option);

// Whether `name` is an option a resumed run may change (OptionSpec::resumable).
bool MayChangeOnResume(const std::string& name);

// The names of those options, for messages: "rounds, threads, ..., deploy.*".
std::string ResumableOptionsList();

// A double as option values are written (17 significant digits, so that
// reading it back gives the same double).
std::string CanonicalDouble(double v);

// The table as Markdown (name, type, default, valid values, description).
std::string OptionsMarkdown();

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_OPTIONS_H_
