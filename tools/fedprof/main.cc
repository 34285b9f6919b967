// fedprof: the command-line tool. One file per subcommand; this one parses
// the command line and turns expected failures into one-line errors.
#include <torch/version.h>

#include <cstdio>
#include <string>
#include <vector>

#include "build_info.h"
#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/process_exit.h"
#include "fedprof/core/single_threaded_ops.h"
#include "tools/fedprof/commands.h"

FEDPROF_SINGLE_THREADED_OPS;

int main(int argc, char** argv) {
  fedprof::SetBlasThreads(1);  // even where OMP_NUM_THREADS asks for more: the numbers must not move
  CLI::App app{"FedProf: federated learning simulator with representation-profiling client selection"};
  // The commit, and the executable's own SHA-256: two machines run the
  // same build when both match.
  app.set_version_flag("--version", [] {
    std::string self = "unknown";
    try {
      self = fedprof::FileSha256Hex("/proc/self/exe");
    } catch (const fedprof::Error&) {
    }
    return std::string("fedprof ") + FEDPROF_VERSION + " (LibTorch " + TORCH_VERSION + "; commit " +
           FEDPROF_COMMIT + "; executable SHA-256 " + self + ")";
  });
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, fedprof::cli::Runner>> commands;
  auto add = [&](fedprof::cli::Runner (*adder)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    fedprof::cli::Runner run = adder(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(run));
  };
  add(fedprof::cli::AddSimulate);
  add(fedprof::cli::AddLaunch);
  add(fedprof::cli::AddCompare);
  add(fedprof::cli::AddPartition);
  add(fedprof::cli::AddProfile);
  add(fedprof::cli::AddDivergence);
  add(fedprof::cli::AddPrivacy);
  add(fedprof::cli::AddPayload);
  add(fedprof::cli::AddPretrain);
  add(fedprof::cli::AddFbftl);
  add(fedprof::cli::AddServer);
  add(fedprof::cli::AddClient);
  add(fedprof::cli::AddRelay);
  add(fedprof::cli::AddKeygen);
  add(fedprof::cli::AddFederation);
  add(fedprof::cli::AddNode);
  add(fedprof::cli::AddOptions);
  add(fedprof::cli::AddStatus);
  add(fedprof::cli::AddHelp);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return fedprof::EndProcess(app.exit(e));
  }
  try {
    for (auto& [sub, run] : commands) {
      if (sub->parsed()) run();
    }
  } catch (const fedprof::Error& e) {
    std::fprintf(stderr, "fedprof: error: %s\n", e.what());
    return fedprof::EndProcess(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fedprof: internal error: %s\n", e.what());
    return fedprof::EndProcess(2);
  }
  return fedprof::EndProcess(0);
}
