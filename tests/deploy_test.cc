// End-to-end tests of the deployment: `fedprof server` and `fedprof client`
// processes on loopback, with mutual TLS from scripts/make-certs.sh, give
// the numbers of `fedprof simulate`, whatever the strategy, DP or secure
// aggregation.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/client/client.h"
#include "fedprof/sim/population.h"
#include "tests/csv_columns.h"
#include "tests/deployment.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/test_dirs.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::FreshDir;
using testing_support::Columns;
using testing_support::kCli;
using testing_support::Processes;
using testing_support::SmallRun;
using testing_support::Summary;
using testing_support::WaitUntil;
using testing_support::Deployment;
using testing_support::kFastFaults;
using testing_support::MakeCerts;
using testing_support::StartClients;
using testing_support::StartServer;
using testing_support::CountRows;
using testing_support::ExpectSameNumbersAsSimulation;
using testing_support::kProcessPerClient;

TEST(DeployTest, FedAvgOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("fedavg", "--set strategy.name=fedavg", nullptr, kProcessPerClient);
}

// A deployed client given the config holds the data of simulated client k
// under any partition: here Dir(0.5) label skew with feature skew on top.
TEST(DeployTest, DirichletPartitionOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("dirichlet",
                                "--set partition.kind=dirichlet --set partition.min_size=20 "
                                "--set quality.feature_skew=0.3");
}

// FedNova's steps travel in the result; FedDyn's ∇L_k stays on the
// client's disk between rounds and h on the server.
TEST(DeployTest, FedNovaAndFedDynOverTheNetworkEqualSimulation) {
  const std::string unequal = " --set partition.kind=dirichlet --set partition.min_size=20";
  ExpectSameNumbersAsSimulation("fednova", "--set strategy.name=fednova" + unequal);
  ExpectSameNumbersAsSimulation("feddyn", "--set strategy.name=feddyn" + unequal);
}

// The state files in `dir` of the client algorithm `algorithm`.
std::vector<std::string> StateFiles(const std::string& dir, const std::string& algorithm) {
  std::vector<std::string> out;
  std::error_code ignored;
  for (const auto& e : std::filesystem::directory_iterator(dir, ignored)) {
    const std::string name = e.path().filename().string();
    if (name.find("." + algorithm + ".") != std::string::npos && name.size() > 6 &&
        name.compare(name.size() - 6, 6, ".state") == 0) {
      out.push_back(e.path().string());
    }
  }
  return out;
}

// SCAFFOLD's c and Δc_i travel after the model in its chunks; its c_i and
// MOON's previous models stay on the clients' disks (beside their keys)
// between rounds, a file a client and run.
TEST(DeployTest, ScaffoldAndMoonOverTheNetworkEqualSimulation) {
  const std::string unequal = " --set partition.kind=dirichlet --set partition.min_size=20";
  for (const std::string algorithm : {"scaffold", "moon"}) {
    std::string server_dir;
    ExpectSameNumbersAsSimulation(algorithm, "--set strategy.name=" + algorithm + unequal, &server_dir);
    // Each client that trained has one file of this run (beside older runs').
    EXPECT_GE(StateFiles(server_dir + "/../certs", algorithm).size(), 3u) << algorithm;
  }
}

// A state file corrupted between rounds: the client says so in one line,
// starts from the algorithm's reset (c_i = 0) and the run goes on.
TEST(DeployTest, ACorruptStateFileIsOneLineAndTheAlgorithmsReset) {
  const std::string dir = FreshDir("deploy", "corrupt_state");
  const std::string certs = MakeCerts(dir, 2);
  const std::string run = SmallRun(2, 1.0, 4) + " --set strategy.name=scaffold";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 2, run + " --tls-dir " + certs + " --state-dir " + dir + "/states", dir);
  // Client 0's file loses a bit each time a round writes it, until the
  // client has read one so (a round's read follows the previous round's
  // write by the server's whole round trip).
  std::string file, corrupted;
  const bool seen = WaitUntil(
      [&] {
        if (file.empty()) {
          for (const std::string& f : StateFiles(dir + "/states", "scaffold")) {
            if (f.find("/client-0.scaffold.") != std::string::npos) file = f;
          }
          if (file.empty()) return false;
        }
        std::string bytes = ReadFile(file);
        if (bytes != corrupted) {
          bytes[bytes.size() - 1] ^= 0x01;
          WriteFileAtomic(file, bytes);
          corrupted = bytes;
        }
        return d.procs.Output(d.clients[0]).find("fails its checksum") != std::string::npos;
      },
      120);
  ASSERT_TRUE(seen) << d.procs.Output(d.clients[0]);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const std::string output = d.procs.Output(d.clients[0]);
  const std::string line = "client 0: its state file " + file +
                           " fails its checksum (corrupt); SCAFFOLD starts again from c_i = 0";
  EXPECT_NE(output.find(line), std::string::npos) << output;
  EXPECT_EQ(d.procs.Output(d.clients[1]).find("state file"), std::string::npos);
  EXPECT_EQ(Columns(dir + "/server/metrics.csv").at("returned"), (std::vector<std::string>{"2", "2", "2", "2"}));
}

// The strong attacks and the rules against them over the network: the
// tailored attack crafted on the server's side from the round's honest
// results against FLTrust (its root update, the median norm, momentum),
// clients that plant a backdoor in their own data against Bulyan (its
// success rate measured by the server), clients that flip their labels
// against FLAME after nearest-neighbour mixing, and IPM against Zeno's
// validation scores with the fallback to the server's own step (the
// server's D_V in a deployment, 100 samples: 50 to train, 50 to validate)
// equal simulation.
TEST(DeployTest, StrongAttacksAndRulesOverTheNetworkEqualSimulation) {
  ExpectSameNumbersAsSimulation("fltrust_tailored",
                                "--set strategy.aggregator=fltrust --set attack.share=0.4 --set attack.kind=tailored "
                                "--set robust.fltrust_scale=median --set robust.momentum=0.5");
  ExpectSameNumbersAsSimulation("bulyan_backdoor",
                                "--set strategy.aggregator=bulyan --set attack.share=0.4 "
                                "--set attack.kind=backdoor --set attack.scale=1");
  ExpectSameNumbersAsSimulation("flame_label_flip",
                                "--set strategy.aggregator=flame --set attack.share=0.4 "
                                "--set attack.kind=label_flip --set robust.pre_aggregation=nnm");
  ExpectSameNumbersAsSimulation("zeno_fallback_ipm",
                                "--set strategy.aggregator=zeno --set attack.share=0.4 --set attack.kind=ipm "
                                "--set robust.fallback=root --set robust.root_size=50");
}

// User-level DP over the network: each client clips its own update to the
// round's clip norm (adaptive, so it changes from round to round), the
// server draws the noise and the sample from its own key (server.dp.key):
// the deployment equals its simulation handed that key, bit for bit, the
// ledger's columns included. A deployment refuses noise that the config's
// seed would give away, in one line.
TEST(DeployTest, UserLevelDpOverTheNetworkEqualsSimulation) {
  std::string server_dir;
  ExpectSameNumbersAsSimulation(
      "dp",
      "--set dp.mode=central --set dp.noise_multiplier=0.5 --set dp.clipping=adaptive "
      "--set dp.clip_norm=0.3 --set dp.count_noise=1 --set dp.noise=keyed",
      &server_dir);
  const auto deployed = Columns(server_dir + "/metrics.csv");
  const auto simulated = Columns(server_dir + "/../sim/metrics.csv");
  EXPECT_EQ(deployed.at("dp_clip_norm"), simulated.at("dp_clip_norm"));
  EXPECT_EQ(deployed.at("dp_unclipped"), simulated.at("dp_unclipped"));
  EXPECT_EQ(deployed.at("dp_epsilon"), simulated.at("dp_epsilon"));
  EXPECT_EQ(deployed.at("dp_epsilon_server"), simulated.at("dp_epsilon_server"));
  // Against the server, who adds the noise, a client that took part has no
  // guarantee; the key's sample may leave a round without any (0.4^5).
  int64_t taken = 0;
  for (size_t r = 0; r < 3; ++r) {
    taken += std::stoll(deployed.at("selected")[r]);
    EXPECT_EQ(deployed.at("dp_epsilon_server")[r], taken > 0 ? "inf" : "0") << "round " << r + 1;
  }
  EXPECT_NE(deployed.at("dp_clip_norm")[0], deployed.at("dp_clip_norm")[2]);
  // The seeded simulation's model is another: the key, not the seed, made it.
  const std::string dir = FreshDir("deploy", "dp_seeded");
  Processes p;
  const std::string seeded =
      SmallRun(5, 0.6, 3) +
      " --set dp.mode=central --set dp.noise_multiplier=0.5 --set dp.clipping=adaptive "
      "--set dp.clip_norm=0.3 --set dp.count_noise=1";
  const int sim = p.Start(kCli, "simulate " + seeded + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(p.Wait(sim, 120), 0) << p.Output(sim);
  EXPECT_NE(Summary(dir + "/sim").at("final_model_sha256"), Summary(server_dir).at("final_model_sha256"));
  const int refused =
      p.Start(kCli, "server --listen 127.0.0.1:0 --insecure " + seeded + " --out " + dir + "/server",
              dir + "/server.log");
  EXPECT_EQ(p.Wait(refused, 60), 1);
  EXPECT_NE(p.Output(refused).find("dp.noise = seeded: whoever knows the config's seed could recompute the "
                                   "server's noise and sample and subtract it"),
            std::string::npos)
      << p.Output(refused);
  // The key served that run: a second run on it would repeat its noise.
  const int again = p.Start(kCli, "server --listen 127.0.0.1:0 " + seeded + " --set dp.noise=keyed --tls-dir " +
                                      server_dir + "/../certs --out " + dir + "/again",
                            dir + "/again.log");
  EXPECT_EQ(p.Wait(again, 60), 1);
  EXPECT_NE(p.Output(again).find("server.dp.key served run " + std::filesystem::absolute(server_dir).string() +
                                 " already: one key serves one run"),
            std::string::npos)
      << p.Output(again);
}

// Distributed DP over the network: each client clips, encodes and noises
// its own update (its noise from its own key, client-K.dp.key, for the
// task) before SecAgg+ masks it; the server decodes the noised sum. The
// deployment equals its simulation handed the clients' keys, bit for bit,
// the ledger included, and each client's log states what it spent. A
// client whose own config asks for more noise than the server's tasks carry
// refuses them in one line.
TEST(DeployTest, DistributedDpOverTheNetworkEqualsSimulation) {
  // Every client every round (q = 1): a session of 5 with one colluder
  // needs 3.
  const std::string ddp =
      "--set dp.mode=distributed --set dp.noise_multiplier=0.5 --set dp.clip_norm=0.3 --set dp.noise=keyed "
      "--set secagg.protocol=secagg+ --set secagg.min_clients=2 --set strategy.fraction=1 "
      "--set dp.client_unbounded=true";  // z = 0.5 in sessions of 5 spends the default budget in a round
  std::string server_dir;
  ExpectSameNumbersAsSimulation("distributed_dp", ddp, &server_dir, kProcessPerClient);
  const auto deployed = Columns(server_dir + "/metrics.csv");
  const auto simulated = Columns(server_dir + "/../sim/metrics.csv");
  EXPECT_EQ(deployed.at("dp_epsilon"), simulated.at("dp_epsilon"));
  EXPECT_EQ(deployed.at("dp_epsilon_server"), simulated.at("dp_epsilon_server"));
  EXPECT_NE(deployed.at("dp_epsilon")[2], "inf");
  EXPECT_NE(deployed.at("dp_epsilon_server")[2], "inf");
  EXPECT_EQ(deployed.at("train_loss"), (std::vector<std::string>(3, "nan"))) << "no loss leaves a client";
  const std::string client_log = ReadFile(server_dir + "/../client-2.log");
  EXPECT_NE(client_log.find("client 2: round 3: contributes to a secagg+ session of 5 invited: k = 2, t = 2, at "
                            "most 1 colluders (secagg.corrupt = 0.1 of a fleet of 5), at least 4 honest clients "
                            "in the sum; its ledger: 3 contributions: epsilon "),
            std::string::npos)
      << client_log;
  // Its status, from the ledger beside its keys: every round of the run,
  // and what it spent against the server, above what observers learn.
  const testing_support::CliResult status =
      testing_support::RunCli("status " + server_dir + "/../certs/client-2.ledger --json");
  ASSERT_EQ(status.code, 0) << status.output;
  const auto ledger = nlohmann::json::parse(status.output);
  EXPECT_EQ(ledger.at("contributions"), 3);
  ASSERT_EQ(ledger.at("rounds_by_run").size(), 1u);
  EXPECT_EQ(ledger.at("rounds_by_run").begin().value(), nlohmann::json({1, 2, 3}));
  EXPECT_GT(ledger.at("epsilon_server").get<double>(), ledger.at("epsilon_observers").get<double>());
  EXPECT_EQ(ledger.at("delta"), 0.2) << "1 / clients.count";

  const std::string dir = FreshDir("deploy", "distributed_dp_less_noise");
  const std::string certs = MakeCerts(dir, 5);
  // The session goes on without one client of five (secagg.dropout).
  const std::string run = SmallRun(5, 1.0, 1) + kFastFaults + " " + ddp + " --set secagg.dropout=0.2";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 4, run + " --tls-dir " + certs, dir);
  StartClients(&d, 4, 5, run + " --set dp.noise_multiplier=2 --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const std::string said = d.procs.Output(d.clients[4]);
  EXPECT_NE(
      said.find("refused a task that would send its update in an encoding of the server's: its noise sd"),
      std::string::npos)
      << said;
  EXPECT_NE(said.find("this client's dp.noise_multiplier asks of a sum of at least 3 honest clients: this "
                      "client's configuration requires distributed DP"),
            std::string::npos)
      << said;
  const auto cols = Columns(dir + "/server/metrics.csv");
  EXPECT_EQ(cols.at("refused"), (std::vector<std::string>{"1"}));
  EXPECT_EQ(cols.at("returned"), (std::vector<std::string>{"4"})) << "the others' sum went on";

  // A deployed client will not draw its noise from the config's seed.
  Processes p;
  const int seeded =
      p.Start(kCli,
              "client --server 127.0.0.1:1 --id 0 " + SmallRun(5, 1.0, 1) +
                  " --set dp.mode=distributed --set secagg.protocol=secagg+ --tls-dir " + certs,
              dir + "/seeded.log");
  EXPECT_EQ(p.Wait(seeded, 60), 1);
  EXPECT_NE(p.Output(seeded).find("dp.noise = seeded: whoever knows the config's seed could recompute this "
                                  "client's noise and subtract it"),
            std::string::npos)
      << p.Output(seeded);
}

// A certificate does not make a client clip: a rogue that sends an update
// far beyond the clip norm, and claims it needed no clipping, is refused
// every round in one line naming the norm; the others' rounds go on.
TEST(DeployTest, UnderDpAnUnclippedUpdateIsRefused) {
  const std::string dir = FreshDir("deploy", "dp_unclipped");
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 1.0, 2) + kFastFaults + " --set dp.mode=central --set dp.noise=secret";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 4, run + " --tls-dir " + certs, dir);
  const int rogue = d.procs.Start(
      ROGUE_CLIENT, "--server " + d.address + " --id 4 --tls-dir " + certs + " --mode unclipped",
      dir + "/rogue.log");
  EXPECT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("client 4 refused: update norm"), std::string::npos) << log;
  EXPECT_NE(log.find("exceeds the round's clip norm 1"), std::string::npos) << log;
  d.procs.Wait(rogue, 30);
  const auto cols = Columns(dir + "/server/metrics.csv");
  ASSERT_EQ(cols.at("round").size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(cols.at("selected")[r], "5") << "q = 1: everyone";
    EXPECT_EQ(cols.at("returned")[r], "4");
    EXPECT_EQ(cols.at("refused")[r], "1");
  }
}

// FedBuff over the network with every client in every step (concurrency =
// buffer = K, places refilled at the step: no staleness) is synchronous
// FedAvg: the deployment equals its simulation and FedAvg's model, bit for
// bit.
TEST(DeployTest, FedBuffOfWholeStepsOverTheNetworkIsFedAvg) {
  std::string server_dir;
  ExpectSameNumbersAsSimulation("fedbuff_steps", "--set strategy.name=fedbuff --set fedbuff.refill=step",
                                &server_dir);
  const std::string dir = FreshDir("deploy", "fedbuff_steps_fedavg");
  Processes sim;
  const int s = sim.Start(
      kCli, "simulate " + SmallRun(5, 0.6, 3) + " --set strategy.name=fedavg --out " + dir, dir + ".log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);
  EXPECT_EQ(Summary(server_dir).at("final_model_sha256"), Summary(dir).at("final_model_sha256"));
  const auto metrics = Columns(server_dir + "/metrics.csv");
  for (const std::string& staleness : metrics.at("staleness")) EXPECT_EQ(staleness, "0");
  // Attackers that craft their models from a round's honest ones have no
  // round to wait for: refused before any client is waited for.
  const testing_support::CliResult refused = testing_support::RunCli(
      "server --listen 127.0.0.1:0 --insecure " + SmallRun(5, 0.6, 3) +
      " --set strategy.name=fedbuff --set attack.kind=alie --set attack.share=0.4 --out " + dir + "-refused");
  EXPECT_EQ(refused.code, 1) << refused.output;
  EXPECT_NE(refused.output.find("error: strategy.aggregator = fedbuff: attack.kind = alie crafts"),
            std::string::npos)
      << refused.output;
}

// FedBuff as the paper runs it, over the network: FedProf picks which idle
// client starts next (its profiles reported between the streamed tasks), a
// place refills as soon as a result arrives, and the server steps on every
// two. A client killed mid-run is lost to it; the server, killed too,
// resumes from its last step, sends the clients in training their tasks
// again, and the run goes on and learns.
TEST(DeployTest, FedBuffOverTheNetworkLearnsWhileClientsComeAndGo) {
  const std::string dir = FreshDir("deploy", "fedbuff_arrival");
  const std::string certs = MakeCerts(dir, 6);
  const std::string run = SmallRun(6, 0.5, 12, /*images=*/3000) +
                          " --set strategy.name=fedprof --set strategy.aggregator=fedbuff "
                          "--set fedbuff.buffer=2 --set train.lr=0.05 --set deploy.min_clients=5" +
                          kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 6, run + " --tls-dir " + certs + " --give-up-after 60", dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 3; }, 120)) << d.procs.Output(d.server);
  d.procs.Kill(d.clients.back());
  d.procs.Kill(d.server);
  const int resumed =
      d.procs.Start(kCli, "server --resume " + dir + "/server --listen " + d.address + " --tls-dir " + certs,
                    dir + "/resumed.log");
  ASSERT_EQ(d.procs.Wait(resumed, 180), 0) << d.procs.Output(resumed);
  for (size_t c = 0; c + 1 < d.clients.size(); ++c) EXPECT_EQ(d.procs.Wait(d.clients[c], 30), 0);

  const auto m = Columns(metrics);
  ASSERT_EQ(m.at("round").size(), 12u);
  // Stale steps make the curve noisy: its best, against the first step.
  double best = 0, lowest = 1e9;
  for (const std::string& a : m.at("accuracy")) best = std::max(best, std::stod(a));
  for (const std::string& l : m.at("loss")) lowest = std::min(lowest, std::stod(l));
  EXPECT_GT(best, std::stod(m.at("accuracy").front()) + 0.1);
  EXPECT_LT(lowest, std::stod(m.at("loss").front()) - 0.2);
  double staleness = 0;
  for (size_t i = 0; i < m.at("round").size(); ++i) {
    EXPECT_EQ(m.at("returned")[i], "2") << "a step per two results";
    staleness += std::stod(m.at("staleness")[i]);
  }
  EXPECT_GT(staleness, 0) << "results trained on earlier versions were used";
  // Every client has a score from its profile from the first step on.
  const auto scores = Columns(dir + "/server/scores.csv");
  ASSERT_EQ(scores.at("round").size(), 12u);
  for (int k = 0; k < 6; ++k) EXPECT_GT(std::stod(scores.at("c" + std::to_string(k)).front()), 0) << k;
}

// Many clients in one process (fedprof client --ids A-B, for load tests) are
// each the client a process of its own would be.
TEST(DeployTest, ClientsSharingAProcessEqualSimulation) {
  ExpectSameNumbersAsSimulation("ranges", "", nullptr, {{0, 2}, {3, 4}});
}

// Past deploy.max_clients connected clients, a registration is refused with
// a retryable status that names the bound; the client keeps retrying (until
// its --give-up-after) and the run goes on with the clients it holds.
TEST(DeployTest, RegistrationsPastMaxClientsAreRefusedAndRetried) {
  const std::string dir = FreshDir("deploy", "max_clients");
  const std::string certs = MakeCerts(dir, 3);
  const std::string run = SmallRun(3, 1.0, 60) + kFastFaults +
                          " --set deploy.max_clients=2 --set deploy.min_clients=2";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 2, run + " --tls-dir " + certs, dir);
  ASSERT_TRUE(WaitUntil([&] { return CountRows(dir + "/server/metrics.csv") >= 1; }, 120))
      << d.procs.Output(d.server);
  const int late = d.procs.Start(kCli,
                                 "client --server " + d.address + " --id 2 --give-up-after 4 " +
                                     run + " --tls-dir " + certs,
                                 dir + "/client-2.log");
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  EXPECT_NE(d.procs.Wait(late, 60), 0) << d.procs.Output(late);
  EXPECT_NE(d.procs.Output(d.server).find("client 2 refused: Register: the server holds its most connected "
                                          "clients, 2 (deploy.max_clients)"),
            std::string::npos)
      << d.procs.Output(d.server);
  EXPECT_NE(d.procs.Output(late).find("deploy.max_clients"), std::string::npos)
      << d.procs.Output(late);
  const auto metrics = Columns(dir + "/server/metrics.csv");
  ASSERT_EQ(metrics.at("selected").size(), 60u);
  for (const std::string& selected : metrics.at("selected")) EXPECT_EQ(selected, "2");
}

TEST(DeployTest, FedProfOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("fedprof", "--set strategy.name=fedprof", nullptr, kProcessPerClient);
}

// The encrypted reference goes out with the tasks, Enc(q div) comes back.
TEST(DeployTest, SecureMatchingOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("secure", "--set strategy.name=fedprof --set "
                                          "fedprof.secure_matching=paillier --set "
                                          "model.profile_layer=conv2");
}

// FedProf with Paillier matching and SecAgg+ over gRPC: the server sees
// neither profiles nor models, only encrypted divergences and each round's
// sum, and the run equals simulate's (whose sessions run in process) bit for
// bit.
TEST(DeployTest, SecureAggregationOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("secagg", "--set strategy.name=fedprof --set "
                                          "fedprof.secure_matching=paillier --set "
                                          "model.profile_layer=conv2 --set secagg.protocol=secagg+ "
                                          "--set secagg.min_clients=3");
}

// Five client processes under SecAgg+; the last is killed once the server
// has its masked model of the last round. Its model still counts (its self
// mask is recovered from its neighbours' shares), so the model equals the
// plaintext simulation's bit for bit.
TEST(DeployTest, SecureAggregationSurvivesAClientKilledAfterMasking) {
  const std::string dir = FreshDir("deploy", "secagg_kill");
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 1.0, 2) + kFastFaults;
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);
  const std::string plaintext = Summary(dir + "/sim").at("final_model_sha256");

  Deployment d;
  // δ = 0.2: a session of 5 survives one dropout. The clients' own
  // configuration says the same (they compute k and t from it).
  const std::string secure =
      run + " --set secagg.protocol=secagg+ --set secagg.dropout=0.2 --set secagg.min_clients=5";
  StartServer(&d, secure + " --set report.progress=true --tls-dir " + certs + " --out " + dir + "/server",
              dir + "/server.log");
  StartClients(&d, 0, 4, secure + " --tls-dir " + certs, dir);
  const int victim = d.procs.Start(
      kCli,
      "client --server " + d.address + " --id 4 " + secure + " --set report.progress=true --tls-dir " + certs,
      dir + "/client-4.log");
  const auto deadline = testing_support::DeadlineIn(120);
  while (d.procs.Output(victim).find("round 2 masked model delivered") == std::string::npos) {
    ASSERT_TRUE(d.procs.Running(victim) && std::chrono::steady_clock::now() < deadline)
        << d.procs.Output(victim);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  d.procs.Kill(victim);
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const std::string log = d.procs.Output(d.server);
  for (const char* round : {"round 1: ", "round 2: "}) {
    EXPECT_NE(log.find(std::string(round) + "secagg+ of 5 clients (k = "), std::string::npos) << log;
  }
  EXPECT_NE(log.find("round 2: secagg+ of 5 clients"), std::string::npos) << log;
  EXPECT_NE(log.find("5 models in the sum", log.find("round 2: secagg+")), std::string::npos) << log;
  EXPECT_EQ(Columns(dir + "/server/metrics.csv").at("returned"), (std::vector<std::string>{"5", "5"}));
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"), plaintext);
}

// Under secure aggregation no model reaches the server in the clear: a client
// that sends one anyway is refused on arrival, before any of it is read as
// a model, and the others' models are summed without it.
TEST(DeployTest, UnderSecureAggregationAModelInTheClearIsRefused) {
  const std::string dir = FreshDir("deploy", "secagg_cleartext");
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 1.0, 2) + kFastFaults;
  Deployment d;
  const std::string secure =
      run + " --set secagg.protocol=secagg+ --set secagg.dropout=0.2 --set secagg.min_clients=5";
  StartServer(&d, secure + " --set report.progress=true --tls-dir " + certs + " --out " + dir + "/server",
              dir + "/server.log");
  StartClients(&d, 0, 4, secure + " --tls-dir " + certs, dir);
  const int rogue = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 4 --tls-dir " + certs +
                                                    " --mode cleartext", dir + "/cleartext.log");
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  EXPECT_EQ(d.procs.Wait(rogue, 30), 0) << d.procs.Output(rogue);
  const std::string said = d.procs.Output(rogue);
  EXPECT_NE(said.find("round 1 (secure aggregation): refused:"), std::string::npos) << said;
  EXPECT_NE(said.find("model values, expected 0"), std::string::npos) << said;
  const auto cols = Columns(dir + "/server/metrics.csv");
  EXPECT_EQ(cols.at("refused"), (std::vector<std::string>{"1", "1"}));
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("round 2: secagg+ of 4 clients"), std::string::npos) << log;
  // Its secure aggregation messages out of place are answered and logged,
  // each naming it: none open, a session never issued, before its result.
  for (const char* refused :
       {"client 4 refused: SecAgg: no secure aggregation session is open",
        "client 4 refused: SecAgg: unknown session: register again",
        "client 4 refused: SecAgg: its result is not (or not yet) accepted"}) {
    EXPECT_NE(log.find(refused), std::string::npos) << refused << "\n" << log;
  }
  EXPECT_NE(said.find("secure aggregation message: no secure aggregation session is open"), std::string::npos)
      << said;
}

// No downgrade: a client whose own configuration says secure aggregation
// refuses a training task that comes without a session (its model would
// go to the server in the clear), says so in one line, and stays; the
// server counts the refusal and goes on with the others.
TEST(DeployTest, AClientThatRequiresSecureAggregationRefusesAPlainTask) {
  const std::string dir = FreshDir("deploy", "secagg_downgrade");
  const std::string certs = MakeCerts(dir, 3);
  const std::string run = SmallRun(3, 1.0, 2) + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 2, run + " --tls-dir " + certs, dir);
  StartClients(&d, 2, 3, run + " --set secagg.protocol=secagg+ --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const std::string said = d.procs.Output(d.clients[2]);
  EXPECT_NE(said.find("round 1: refused a task that would send its model in the clear: this client's "
                      "configuration requires secure aggregation"),
            std::string::npos)
      << said;
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("client 2 refused: refused a task that would send its model in the clear"),
            std::string::npos)
      << log;
  EXPECT_EQ(Columns(dir + "/server/metrics.csv").at("refused"), (std::vector<std::string>{"1", "1"}));
}

// A client's secure aggregation key is the one issued with its certificate
// (secagg-roster): the server refuses a client that registers another, and
// a client without its key file says so.
TEST(DeployTest, SecureAggregationKeysAreTheOnesIssuedWithTheCertificates) {
  const std::string dir = FreshDir("deploy", "secagg_keys");
  const std::string certs = MakeCerts(dir, 3);
  const std::string run = SmallRun(3, 1.0, 1) + kFastFaults;
  const std::string other = dir + "/other", missing = dir + "/missing";
  std::filesystem::copy(certs, other);
  std::filesystem::copy(certs, missing);
  ASSERT_EQ(std::system(("openssl genpkey -algorithm ed25519 -out " + other + "/client-0.secagg.key").c_str()), 0);
  std::filesystem::remove(missing + "/client-1.secagg.key");
  Deployment d;
  StartServer(&d,
              run + " --set secagg.protocol=secagg --set secagg.min_clients=3 --tls-dir " + certs +
                  " --out " + dir + "/server",
              dir + "/server.log");
  const std::string client = "client --server " + d.address + " " + run + " --tls-dir ";
  const int forged = d.procs.Start(kCli, client + other + " --id 0", dir + "/forged.log");
  const int keyless = d.procs.Start(kCli, client + missing + " --id 1", dir + "/keyless.log");
  EXPECT_NE(d.procs.Wait(forged, 60), 0);
  EXPECT_NE(d.procs.Output(forged).find("is not the one secagg-roster names for client 0"), std::string::npos)
      << d.procs.Output(forged);
  EXPECT_NE(d.procs.Wait(keyless, 60), 0);
  EXPECT_NE(d.procs.Output(keyless).find("client-1.secagg.key: no such file"), std::string::npos)
      << d.procs.Output(keyless);
}

// Keys where they belong: each client makes its own keys (fedprof keygen)
// and sends only a certificate request and its roster line; the CA (not the
// server) signs the one and lists the other. The CA's directory never holds
// a client's private key, and a deployment of such clients under SecAgg+
// ends on the plaintext simulation's model. The CA refuses a request for
// another client's name and a second key for a client.
TEST(DeployTest, EachClientsKeysAreMadeOnItsOwnMachine) {
  const std::string dir = FreshDir("deploy", "keygen");
  const std::string ca = dir + "/ca", make = "bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh ";
  ASSERT_EQ(std::system((make + "--ca " + ca + " > /dev/null").c_str()), 0);
  std::string requests;
  for (int k = 0; k < 3; ++k) {
    // keygen makes the directory it is told to write to.
    const std::string machine = dir + "/client-machine-" + std::to_string(k);
    const std::string keygen = std::string(kCli) + " keygen --id " + std::to_string(k) + " --out " + machine +
                               " > /dev/null";
    ASSERT_EQ(std::system(keygen.c_str()), 0);
    for (const char* secret : {".secagg.key", ".dp.key", ".key"}) {
      const auto mode =
          std::filesystem::status(machine + "/client-" + std::to_string(k) + secret).permissions();
      EXPECT_EQ(mode & std::filesystem::perms::all,
                std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
          << secret;
    }
    requests += " " + machine + "/client-" + std::to_string(k) + ".csr " + machine + "/client-" +
                std::to_string(k) + ".secagg.pub";
  }
  ASSERT_EQ(std::system((make + "--sign " + ca + requests + " > /dev/null").c_str()), 0);
  for (const auto& entry : std::filesystem::directory_iterator(ca)) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.rfind("client-", 0) == 0 && name.find(".key") != std::string::npos)
        << "the CA holds a client's private key: " << name;
  }
  // What each machine is handed back: its certificate, ca.crt and the roster.
  for (int k = 0; k < 3; ++k) {
    const std::string machine = dir + "/client-machine-" + std::to_string(k);
    for (const std::string& file :
         {std::string("ca.crt"), std::string("secagg-roster"), "client-" + std::to_string(k) + ".crt"}) {
      std::filesystem::copy_file(ca + "/" + file, machine + "/" + file);
    }
  }
  const std::string run = SmallRun(3, 1.0, 1) + kFastFaults;
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);
  const std::string secure = run + " --set secagg.protocol=secagg+ --set secagg.min_clients=3";
  Deployment d;
  StartServer(&d, secure + " --tls-dir " + ca + " --out " + dir + "/server", dir + "/server.log");
  for (int k = 0; k < 3; ++k) {
    d.clients.push_back(d.procs.Start(kCli,
                                      "client --server " + d.address + " --id " + std::to_string(k) + " " +
                                          secure + " --tls-dir " + dir + "/client-machine-" +
                                          std::to_string(k),
                                      dir + "/client-" + std::to_string(k) + ".log"));
  }
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"),
            Summary(dir + "/sim").at("final_model_sha256"));

  // The CA refuses a request under another client's name, and a second key.
  const std::string other = dir + "/other";
  std::filesystem::create_directories(other);
  ASSERT_EQ(std::system((std::string(kCli) + " keygen --id 0 --out " + other + " > /dev/null").c_str()), 0);
  std::filesystem::copy_file(other + "/client-0.csr", other + "/client-7.csr");
  const std::string log = dir + "/sign.log";
  EXPECT_NE(std::system((make + "--sign " + ca + " " + other + "/client-7.csr > " + log + " 2>&1").c_str()),
            0);
  EXPECT_NE(ReadFile(log).find("client-7.csr: its subject is 'CN=client-0', not CN=client-7"),
            std::string::npos)
      << ReadFile(log);
  EXPECT_NE(
      std::system((make + "--sign " + ca + " " + other + "/client-0.secagg.pub > " + log + " 2>&1").c_str()),
      0);
  EXPECT_NE(ReadFile(log).find("secagg-roster already lists another key for client 0"), std::string::npos)
      << ReadFile(log);
  // Client 0 re-keyed as guide-deploy.md says: its roster line removed,
  // its new request and key signed; the roster lists the new key alone.
  ASSERT_EQ(std::system(("sed -i '/^0 /d' " + ca + "/secagg-roster").c_str()), 0);
  ASSERT_EQ(std::system((make + "--sign " + ca + " " + other + "/client-0.csr " + other +
                         "/client-0.secagg.pub > " + log + " 2>&1").c_str()),
            0)
      << ReadFile(log);
  const std::string roster = ReadFile(ca + "/secagg-roster");
  EXPECT_NE(roster.find(ReadFile(other + "/client-0.secagg.pub")), std::string::npos) << roster;
  EXPECT_EQ(std::count(roster.begin(), roster.end(), '\n'), 3) << roster;
}

}  // namespace
}  // namespace fedprof
