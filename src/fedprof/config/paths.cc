#include "fedprof/config/paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "fedprof/core/text.h"

namespace fedprof {
namespace {

// The path as the process would open it, or empty when it cannot be
// resolved (a directory it may not search, a loop of links).
std::filesystem::path Resolved(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return {};
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, error);
  if (error) return {};
  return resolved.lexically_normal();
}

}  // namespace

const std::vector<std::string>& PathOptions() {
  static const std::vector<std::string> options = {"data.dir",           "data.train_file",       "data.test_file",
                                                   "model.file",         "availability.trace",    "transfer.source_model",
                                                   "dp.key_dir"};
  return options;
}

bool InsideRoots(const std::string& path, const std::vector<std::string>& roots) {
  if (path.empty()) return false;
  const std::filesystem::path resolved = Resolved(path);
  if (resolved.empty()) return false;
  for (const std::string& root : roots) {
    const std::filesystem::path base = root.empty() ? std::filesystem::path() : Resolved(root);
    if (base.empty()) continue;  // a root that cannot be resolved holds nothing
    // Component by component: /srv/data holds /srv/data/x, not /srv/database.
    const auto [end, unused] = std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
    if (end == base.end() || (std::next(end) == base.end() && end->empty())) return true;
  }
  return false;
}

std::string PathRefusal(const Config& config, const std::vector<std::string>& roots, const std::string& policy,
                        const std::vector<std::string>& skip) {
  for (const std::string& option : PathOptions()) {
    if (std::find(skip.begin(), skip.end(), option) != skip.end()) continue;
    const std::string path = config.Value(option);
    if (path.empty() || InsideRoots(path, roots)) continue;
    return option + " = " + Printable(path, 200) + ": outside the directories " + policy + " lets a run read" +
           (roots.empty() ? " (it names none)" : "");
  }
  return "";
}

}  // namespace fedprof
