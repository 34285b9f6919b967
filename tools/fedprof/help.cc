// fedprof help: the usage of the tool, and (--flags) every command with the
// flags its parser accepts, read from the parser itself so that a checker of
// the docs (scripts/docs.py) has no list of its own to keep up to date.
#include <cstdio>
#include <memory>
#include <string>

#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

// One line per command, its path first ("fedprof privacy label"), then each
// flag: "--name" when it takes no value, "--name=" when it takes one and
// "--name=..." when it takes every word up to the next flag; then "<name>"
// ("<name>..." when repeated) for each positional argument.
void PrintFlags(const CLI::App& app, const std::string& path) {
  std::string line = path;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_positional()) continue;
    const int values = o->get_items_expected_max();
    const std::string suffix = values == 0 ? "" : values == 1 ? "=" : "=...";
    for (const std::string& name : o->get_lnames()) line += " --" + name + suffix;
    for (const std::string& name : o->get_snames()) line += " -" + name + suffix;
  }
  for (const CLI::Option* o : app.get_options()) {
    if (!o->get_positional()) continue;
    line += " <" + o->get_name() + ">" + (o->get_expected_max() > 1 ? "..." : "");
  }
  std::printf("%s\n", line.c_str());
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    PrintFlags(*sub, path + " " + sub->get_name());
  }
}

}  // namespace

Runner AddHelp(CLI::App& app) {
  auto flags = std::make_shared<bool>(false);
  // Hidden (no group): the usage is what `fedprof --help` shows already.
  CLI::App* sub =
      app.add_subcommand("help", "Usage; --flags: every command and its flags")->group("");
  sub->add_flag("--flags", *flags, "Every command, one a line, with the flags it accepts");
  return [&app, flags] {
    if (*flags) {
      PrintFlags(app, "fedprof");
    } else {
      std::fputs(app.help().c_str(), stdout);
    }
  };
}

}  // namespace fedprof::cli
