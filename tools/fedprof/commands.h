#ifndef FEDPROF_TOOLS_COMMANDS_H_
#define FEDPROF_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace fedprof::cli {

// Each subcommand registers its options on `app` and returns the function
// that runs it once parsing succeeded.
using Runner = std::function<void()>;

Runner AddSimulate(CLI::App& app);
Runner AddOptions(CLI::App& app);

}  // namespace fedprof::cli

#endif  // FEDPROF_TOOLS_COMMANDS_H_
