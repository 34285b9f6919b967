#ifndef FEDPROF_FBFTL_OPTIONS_H_
#define FEDPROF_FBFTL_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"

namespace fedprof {

// The schemes transfer.schemes names, in run order. Throws fedprof::Error
// for an entry that is not a scheme.
std::vector<std::string> TransferSchemes(const RunOptions::Transfer& options);

// A scheme's id (FL 1, FTL_f 2, FTL_c 3, SFL 4, FbFTL 5), part of every
// random stream's tag so that schemes draw independently; 0 for a name that
// is no scheme. The ids are part of the reproducibility contract.
uint64_t SchemeId(const std::string& scheme);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_OPTIONS_H_
