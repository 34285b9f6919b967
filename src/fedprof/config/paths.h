#ifndef FEDPROF_CONFIG_PATHS_H_
#define FEDPROF_CONFIG_PATHS_H_

// The files and directories a run's config makes its process read, and the
// confinement of them to directories a policy names: a config written by
// another party (a federation's run, as its server and every node read it)
// opens nothing outside those directories.

#include <string>
#include <vector>

#include "fedprof/config/config.h"

namespace fedprof {

// Every option whose value is a path read by the run: data.dir,
// data.train_file, data.test_file, model.file, availability.trace,
// transfer.source_model, dp.key_dir.
const std::vector<std::string>& PathOptions();

// Whether `path` (relative to the working directory) lies in one of
// `roots`, once both are resolved (symbolic links followed, "." and ".."
// taken; a part that does not exist is taken as written).
bool InsideRoots(const std::string& path, const std::vector<std::string>& roots);

// "" when every path option that `config` sets, except those of `skip`,
// lies in one of `roots`; else one line naming the first that does not and
// `policy` (what names the roots, e.g. "the federation's --data-root"). The
// line never says whether the path exists, nor anything it holds.
std::string PathRefusal(const Config& config, const std::vector<std::string>& roots, const std::string& policy,
                        const std::vector<std::string>& skip = {});

}  // namespace fedprof

#endif  // FEDPROF_CONFIG_PATHS_H_
