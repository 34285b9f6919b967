#include "fedprof/config/paths.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "fedprof/core/text.h"

namespace fedprof {
namespace {

std::filesystem::path Resolved(const std::string& path) {
  std::error_code ignored;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ignored), ignored);
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
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    const std::filesystem::path base = Resolved(root);
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
