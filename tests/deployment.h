#ifndef FEDPROF_TESTS_DEPLOYMENT_H_
#define FEDPROF_TESTS_DEPLOYMENT_H_

// What the deployment's end-to-end tests (tests/deploy_*_test.cc) share:
// certificates, a server, relays and clients as processes on loopback, and
// the identity every deployment promises (the numbers of `fedprof
// simulate`).

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/files.h"
#include "tests/csv_columns.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/simulate_summary.h"
#include "tests/test_dirs.h"

namespace fedprof::testing_support {

// Quick failure detection for the fault tests.
inline constexpr const char* kFastFaults =
    " --set deploy.heartbeat_s=0.2 --set deploy.heartbeat_timeout_s=2 "
    "--set deploy.round_timeout_s=60 --set deploy.start_timeout_s=60";

// Certificates for `n` clients (and `relays` relays, and the operators of
// the comma-separated `operators`) under dir/<name>: a
// copy of one set per build tree, name and size, which
// scripts/make-certs.sh makes for the first test that asks (the first to
// finish renames its set into place). Sets of two names have two CAs. Each
// test writes into its own copy (the clients' ledgers live beside their
// keys); a test of make-certs.sh itself runs it.
inline std::string MakeCerts(const std::string& dir, int n, const std::string& name = "certs", int relays = 0,
                             const std::string& operators = "") {
  const std::string shared = ::testing::TempDir() + "/certs-" + name + "-" + std::to_string(n) + "-" +
                             std::to_string(relays) + (operators.empty() ? "" : "-" + operators);
  if (!FileExists(shared + "/ca.crt")) {
    const std::string mine = shared + ".made." + std::to_string(::getpid());
    std::filesystem::remove_all(mine);
    const std::string cmd = "RELAYS=" + std::to_string(relays) + " OPERATORS=" + operators + " bash " FEDPROF_SOURCE_DIR
                            "/scripts/make-certs.sh " + mine + " " + std::to_string(n) + " > /dev/null 2>&1";
    const int made = std::system(cmd.c_str());
    EXPECT_EQ(made, 0);
    std::error_code ignored;
    if (made == 0) std::filesystem::rename(mine, shared, ignored);  // fails if another test's came first
    std::filesystem::remove_all(mine, ignored);
  }
  const std::string certs = dir + "/" + name;
  std::filesystem::copy(shared, certs, std::filesystem::copy_options::recursive);
  return certs;
}

inline int CountRows(const std::string& path) {
  if (!FileExists(path)) return 0;
  const std::string s = ReadFile(path);
  return static_cast<int>(std::count(s.begin(), s.end(), '\n')) - 1;
}

struct Deployment {
  Processes procs;
  int server = -1;
  std::vector<int> clients;
  std::vector<int> relays;
  std::string address;
};

// Starts a server on a free loopback port and waits for its address.
inline void StartServer(Deployment* d, const std::string& args, const std::string& log) {
  d->server = d->procs.Start(kCli, "server --listen 127.0.0.1:0 " + args, log);
  d->address = d->procs.WaitForOutput(d->server, "listening on (127\\.0\\.0\\.1:[0-9]+)", 60);
  ASSERT_FALSE(d->address.empty()) << d->procs.Output(d->server);
}

// Clients from .. to - 1, each a process of its own, connecting to `server`
// (a relay's address; by default the server's).
inline void StartClients(Deployment* d, int from, int to, const std::string& args, const std::string& dir,
                  std::string server = "") {
  if (server.empty()) server = d->address;
  for (int k = from; k < to; ++k) {
    d->clients.push_back(d->procs.Start(
        kCli, "client --server " + server + " --id " + std::to_string(k) + " " + args,
        dir + "/client-" + std::to_string(k) + ".log"));
  }
}

// Starts relay `r` between the server and the clients that will connect to
// it (at `listen`, a free loopback port by default); its address.
inline std::string StartRelay(Deployment* d, int r, const std::string& certs, const std::string& dir,
                       const std::string& listen = "127.0.0.1:0") {
  const int h = d->procs.Start(kCli,
                               "relay --server " + d->address + " --listen " + listen + " --id " +
                                   std::to_string(r) + " --tls-dir " + certs + " --give-up-after 30",
                               dir + "/relay-" + std::to_string(r) + ".log");
  d->relays.push_back(h);
  const std::string address = d->procs.WaitForOutput(
      h, "relay " + std::to_string(r) + ": listening on (127\\.0\\.0\\.1:[0-9]+)", 60);
  EXPECT_FALSE(address.empty()) << d->procs.Output(h);
  return address;
}

// The clients of a deployment test: a process each (kProcessPerClient), or
// one process per range of ids (fedprof client --ids A-B), each of whose
// clients is the client a process of its own would be
// (DeployTest.ClientsSharingAProcessEqualSimulation, FedAvg and FedProf).
using ClientProcesses = std::vector<std::pair<int, int>>;
inline const ClientProcesses kProcessPerClient = {};
inline const ClientProcesses kOneProcess = {{0, 4}};

// The identity the deployment promises: 5 clients on loopback give the
// accuracy and loss of `fedprof simulate`, bit for bit. The server's output
// directory goes to `server_dir` when given. The clients run as
// `ranges` says: one process for all 5 by default.
inline void ExpectSameNumbersAsSimulation(const std::string& name, const std::string& settings,
                                          std::string* server_dir = nullptr,
                                          const ClientProcesses& ranges = kOneProcess) {
  const std::string dir = FreshDir("deploy", "identity_" + name);
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 0.6, 3) + " " + settings;
  // Keyed DP noise: the simulation is handed the parties' keys, which the
  // deployed server and clients read from their own --tls-dir.
  const std::string keys =
      settings.find("dp.noise=keyed") != std::string::npos ? " --set dp.key_dir=" + certs : "";
  Simulated(dir, "sim", run + keys);

  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  if (ranges.empty()) StartClients(&d, 0, 5, run + " --tls-dir " + certs, dir);
  for (const auto& [a, b] : ranges) {
    const std::string ids = std::to_string(a) + "-" + std::to_string(b);
    d.clients.push_back(d.procs.Start(kCli,
                                      "client --server " + d.address + " --ids " + ids + " " + run +
                                          " --set report.progress=true --tls-dir " + certs,
                                      dir + "/clients-" + ids + ".log"));
  }
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  // A process of several clients says a line a round for them all: what
  // they computed of each of the 3 rounds. A process of every client has a
  // task in each round that selected any (a DP sample drawn from a key may
  // select none); ClientsSharingAProcessEqualSimulation's seeded sample gives
  // each of its ranges a task each round.
  const auto selected = Columns(dir + "/server/metrics.csv").at("selected");
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::string output = d.procs.Output(d.clients[i]);
    const std::string label = "clients " + std::to_string(ranges[i].first) + "-" + std::to_string(ranges[i].second);
    for (int round = 1; round <= 3; ++round) {
      if (ranges[i] == kOneProcess.front() && selected.at(static_cast<size_t>(round - 1)) == "0") continue;
      EXPECT_NE(output.find(label + ": round " + std::to_string(round) + ": "), std::string::npos) << output;
    }
    EXPECT_EQ(output.find("client " + std::to_string(ranges[i].first) + ": round"), std::string::npos) << output;
  }

  const auto simulated = Columns(dir + "/sim/metrics.csv");
  const auto deployed = Columns(dir + "/server/metrics.csv");
  for (const char* col : {"round", "selected", "returned", "refused", "timed_out", "train_loss",
                          "accuracy", "loss"}) {
    EXPECT_EQ(deployed.at(col), simulated.at(col)) << col;
  }
  for (const char* col : {"backdoor_success", "fallback"}) {
    if (simulated.count(col)) {
      EXPECT_EQ(deployed.at(col), simulated.at(col)) << col;
    }
  }
  if (settings.find("robust.fallback=root") != std::string::npos) {
    EXPECT_EQ(deployed.count("fallback"), 1u);
  }
  EXPECT_EQ(deployed.at("round").size(), 3u);
  // The CSV prints 9 digits; the final model's hash holds every bit.
  const std::string hash = Summary(dir + "/sim").at("final_model_sha256");
  EXPECT_EQ(hash.size(), 64u);
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"), hash);
  EXPECT_TRUE(FileExists(dir + "/server/clients.csv"));
  if (server_dir) *server_dir = dir + "/server";
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_DEPLOYMENT_H_
