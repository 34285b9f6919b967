#include "fedprof/fbftl/options.h"

#include <map>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

std::vector<std::string> TransferSchemes(const RunOptions::Transfer& options) {
  std::vector<std::string> schemes = SplitList(options.schemes);
  for (const std::string& s : schemes) {
    if (SchemeId(s) == 0) {
      throw Error("transfer.schemes: unknown scheme '" + s +
                  "'; expected FL, FTL_f, FTL_c, SFL or FbFTL");
    }
  }
  return schemes;
}

uint64_t SchemeId(const std::string& scheme) {
  static const std::map<std::string, uint64_t> ids = {
      {"FL", 1}, {"FTL_f", 2}, {"FTL_c", 3}, {"SFL", 4}, {"FbFTL", 5}};
  const auto found = ids.find(scheme);
  return found == ids.end() ? 0 : found->second;
}

}  // namespace fedprof
