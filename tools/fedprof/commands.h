#ifndef FEDPROF_TOOLS_COMMANDS_H_
#define FEDPROF_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace fedprof::cli {

// Each subcommand registers its options on `app` and returns the function
// that runs it once parsing succeeded.
using Runner = std::function<void()>;

Runner AddSimulate(CLI::App& app);
Runner AddLaunch(CLI::App& app);
Runner AddCompare(CLI::App& app);
Runner AddProfile(CLI::App& app);
Runner AddDivergence(CLI::App& app);
Runner AddPrivacy(CLI::App& app);
Runner AddPayload(CLI::App& app);
Runner AddPretrain(CLI::App& app);
Runner AddFbftl(CLI::App& app);
Runner AddServer(CLI::App& app);
Runner AddClient(CLI::App& app);
Runner AddOptions(CLI::App& app);

// runs/<config stem>[-<kind>]-<local time>: where outputs go without --out.
std::string DefaultOutDir(const std::string& config_path, const std::string& kind = "");

}  // namespace fedprof::cli

#endif  // FEDPROF_TOOLS_COMMANDS_H_
