// The option table's queries: lookups by name, the choices a string option
// accepts (its own and those registered from outside the engine), what a
// resume may change, and the table as Markdown. The table itself:
// options.cc.
#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "fedprof/config/options.h"

namespace fedprof {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const char* TypeName(OptionType t) {
  switch (t) {
    case OptionType::kInt: return "int";
    case OptionType::kDouble: return "float";
    case OptionType::kBool: return "bool";
    case OptionType::kString: return "string";
  }
  return "";
}

std::string FormatBound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) <= kMaxInt) {
    return std::to_string(static_cast<long long>(v));
  }
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

}  // namespace

const OptionSpec* FindOption(const std::string& name) {
  for (const auto& o : AllOptions()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

std::string NearestOption(const std::string& name) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& o : AllOptions()) {
    const size_t d = EditDistance(name, o.name);
    if (d < best_d) {
      best_d = d;
      best = o.name;
    }
  }
  return best;
}

bool MayBeEmpty(const OptionSpec& option) { return *option.default_value == '\0'; }

namespace {

struct AddedChoices {
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> values;  // by option, in the order added
};

AddedChoices& Added() {
  static AddedChoices* added = new AddedChoices;  // never destroyed: used until exit
  return *added;
}

}  // namespace

void AddChoice(const std::string& option, const std::string& value) {
  AddedChoices& added = Added();
  const std::lock_guard<std::mutex> lock(added.mutex);
  added.values[option].push_back(value);
}

void RemoveChoice(const std::string& option, const std::string& value) {
  AddedChoices& added = Added();
  const std::lock_guard<std::mutex> lock(added.mutex);
  std::vector<std::string>& values = added.values[option];
  const auto it = std::find(values.begin(), values.end(), value);
  if (it != values.end()) values.erase(it);
}

std::string Choices(const OptionSpec& o) {
  if (!*o.choices) return "";
  std::string choices = o.choices;
  AddedChoices& added = Added();
  const std::lock_guard<std::mutex> lock(added.mutex);
  const auto it = added.values.find(o.name);
  if (it != added.values.end()) {
    for (const std::string& v : it->second) choices += "|" + v;
  }
  return choices;
}

std::string ValidValues(const OptionSpec& o) {
  const std::string or_empty = MayBeEmpty(o) ? " or empty" : "";
  switch (o.type) {
    case OptionType::kInt:
    case OptionType::kDouble:
      return "[" + FormatBound(o.min) + ", " + FormatBound(o.max) + "]" + or_empty;
    case OptionType::kBool: return "true|false";
    case OptionType::kString: return *o.choices ? Choices(o) + or_empty : "text";
  }
  return "";
}

bool MayChangeOnResume(const std::string& name) {
  const OptionSpec* option = FindOption(name);
  return option != nullptr && option->resumable;
}

std::string ResumableOptionsList() {
  std::string list;
  for (const auto& o : AllOptions()) {
    if (!o.resumable) continue;
    const std::string name = o.name;
    const std::string section = name.substr(0, name.find('.') + 1);
    // A section of several options, all resumable, is named once: section.*.
    bool whole = !section.empty();
    int in_section = 0;
    for (const auto& other : AllOptions()) {
      if (section.empty() || std::string(other.name).rfind(section, 0) != 0) continue;
      ++in_section;
      whole = whole && other.resumable;
    }
    whole = whole && in_section > 1;
    const std::string item = whole ? section + "*" : name;
    if (list.find(item) == std::string::npos) list += (list.empty() ? "" : ", ") + item;
  }
  return list;
}

std::string OptionsMarkdown() {
  std::ostringstream md;
  md << "| option | type | default | valid | resumable | description |\n"
     << "|---|---|---|---|---|---|\n";
  for (const auto& o : AllOptions()) {
    std::string valid = ValidValues(o);
    std::replace(valid.begin(), valid.end(), '|', ',');
    std::string description;
    for (const char* c = o.description; *c; ++c) description += *c == '|' ? "\\|" : std::string(1, *c);
    md << "| `" << o.name << "` | " << TypeName(o.type) << " | `" << o.default_value << "` | "
       << valid << " | " << (o.resumable ? "yes" : "") << " | " << description << " |\n";
  }
  return md.str();
}

}  // namespace fedprof
