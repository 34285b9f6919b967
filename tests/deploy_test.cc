// End-to-end tests of the deployment: `fedprof server` and `fedprof client`
// processes on loopback, with mutual TLS from scripts/make-certs.sh.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/config/config.h"
#include "fedprof/deploy/client.h"
#include "fedprof/sim/population.h"
#include "tests/csv_columns.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/test_dirs.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::FreshDir;
using testing_support::Columns;
using testing_support::FreePort;
using testing_support::kCli;
using testing_support::kTimeScale;
using testing_support::Processes;
using testing_support::SmallRun;
using testing_support::Summary;
using testing_support::WaitUntil;


// A small real run: 3000 Fashion-MNIST images among the clients.
// Quick failure detection for the fault tests.
const char* kFastFaults =
    " --set deploy.heartbeat_s=0.2 --set deploy.heartbeat_timeout_s=2 "
    "--set deploy.round_timeout_s=60 --set deploy.start_timeout_s=60";

// Certificates for `n` clients (and `relays` relays) under dir/certs.
std::string MakeCerts(const std::string& dir, int n, const std::string& name = "certs", int relays = 0) {
  const std::string certs = dir + "/" + name;
  const std::string cmd = "RELAYS=" + std::to_string(relays) + " bash " FEDPROF_SOURCE_DIR
                          "/scripts/make-certs.sh " + certs + " " + std::to_string(n) + " > /dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return certs;
}

int CountRows(const std::string& path) {
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
void StartServer(Deployment* d, const std::string& args, const std::string& log) {
  d->server = d->procs.Start(kCli, "server --listen 127.0.0.1:0 " + args, log);
  d->address = d->procs.WaitForOutput(d->server, "listening on (127\\.0\\.0\\.1:[0-9]+)", 60);
  ASSERT_FALSE(d->address.empty()) << d->procs.Output(d->server);
}

// Clients from .. to - 1, each a process of its own, connecting to `server`
// (a relay's address; by default the server's).
void StartClients(Deployment* d, int from, int to, const std::string& args, const std::string& dir,
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
std::string StartRelay(Deployment* d, int r, const std::string& certs, const std::string& dir,
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

// The identity the deployment promises: N client processes on loopback give
// the accuracy and loss of `fedprof simulate`, bit for bit. The server's
// output directory goes to `server_dir` when given. With `ranges`, the
// clients run as one process per range (--ids A-B) instead of one each.
void ExpectSameNumbersAsSimulation(const std::string& name, const std::string& settings,
                                   std::string* server_dir = nullptr,
                                   const std::vector<std::pair<int, int>>& ranges = {}) {
  const std::string dir = FreshDir("deploy", "identity_" + name);
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 0.6, 3) + " " + settings;
  // Keyed DP noise: the simulation is handed the parties' keys, which the
  // deployed server and clients read from their own --tls-dir.
  const std::string keys =
      settings.find("dp.noise=keyed") != std::string::npos ? " --set dp.key_dir=" + certs : "";
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + keys + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);

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
  // they computed of each of the 3 rounds.
  for (size_t i = 0; i < ranges.size(); ++i) {
    const std::string output = d.procs.Output(d.clients[i]);
    const std::string label = "clients " + std::to_string(ranges[i].first) + "-" + std::to_string(ranges[i].second);
    for (int round = 1; round <= 3; ++round) {
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
  if (simulated.count("backdoor_success")) {
    EXPECT_EQ(deployed.at("backdoor_success"), simulated.at("backdoor_success"));
  }
  EXPECT_EQ(deployed.at("round").size(), 3u);
  // The CSV prints 9 digits; the final model's hash holds every bit.
  const std::string hash = Summary(dir + "/sim").at("final_model_sha256");
  EXPECT_EQ(hash.size(), 64u);
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"), hash);
  EXPECT_TRUE(FileExists(dir + "/server/clients.csv"));
  if (server_dir) *server_dir = dir + "/server";
}

// Server, two relays and clients behind each (one client direct): every
// relay sends one exact partial sum of its clients' models a round, and the
// run equals simulate's bit for bit; FedProf's profiles pass through the
// relays to the server, which selects by them.
void ExpectRelayedRunEqualsSimulation(const std::string& name, const std::string& settings) {
  const std::string dir = FreshDir("deploy", "relayed_" + name);
  const std::string certs = MakeCerts(dir, 5, "certs", /*relays=*/2);
  const std::string run = SmallRun(5, 0.6, 3) + " " + settings;
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);

  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const std::string relay0 = StartRelay(&d, 0, certs, dir);
  const std::string relay1 = StartRelay(&d, 1, certs, dir);
  ASSERT_FALSE(relay0.empty());
  ASSERT_FALSE(relay1.empty());
  StartClients(&d, 0, 2, run + " --tls-dir " + certs + " --relay 0", dir, relay0);
  StartClients(&d, 2, 4, run + " --tls-dir " + certs + " --relay 1", dir, relay1);
  StartClients(&d, 4, 5, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int r : d.relays) EXPECT_EQ(d.procs.Wait(r, 30), 0) << d.procs.Output(r);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);

  const auto simulated = Columns(dir + "/sim/metrics.csv");
  const auto deployed = Columns(dir + "/server/metrics.csv");
  for (const char* col : {"round", "selected", "returned", "refused", "timed_out", "train_loss",
                          "accuracy", "loss"}) {
    EXPECT_EQ(deployed.at(col), simulated.at(col)) << col;
  }
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"), Summary(dir + "/sim").at("final_model_sha256"));
  // The relays' clients trained, and their sums were taken.
  int summed = 0;
  for (int r : d.relays) {
    const std::string log = d.procs.Output(r);
    EXPECT_EQ(log.find("was not taken"), std::string::npos) << log;
    static const std::regex sent("the sum of ([0-9]+) accepted models sent up");
    for (auto m = std::sregex_iterator(log.begin(), log.end(), sent); m != std::sregex_iterator(); ++m) {
      summed += std::stoi((*m)[1]);
    }
  }
  EXPECT_GT(summed, 0) << "no client behind a relay trained";
}

TEST(DeployTest, FedAvgThroughRelaysEqualsSimulation) {
  ExpectRelayedRunEqualsSimulation("fedavg", "--set strategy.name=fedavg");
}

TEST(DeployTest, FedProfThroughRelaysEqualsSimulation) {
  ExpectRelayedRunEqualsSimulation("fedprof", "--set strategy.name=fedprof");
}

// A relay killed mid-run loses its clients' results for that round only;
// restarted on its address, it takes its clients back (they reconnect to
// it by themselves). Meanwhile the run goes on with the direct client and,
// once that one is gone too, waits for a client rather than run empty rounds.
TEST(DeployTest, RelayKilledAndRestartedTakesItsClientsBack) {
  const std::string dir = FreshDir("deploy", "relay_restart");
  const std::string certs = MakeCerts(dir, 4, "certs", /*relays=*/1);
  const std::string run = SmallRun(4, 1.0, 60) + kFastFaults + " --set strategy.name=fedavg";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  ASSERT_EQ(StartRelay(&d, 0, certs, dir, listen), listen);
  StartClients(&d, 0, 3, run + " --tls-dir " + certs + " --relay 0", dir, listen);
  StartClients(&d, 3, 4, run + " --tls-dir " + certs, dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 3; }, 120)) << d.procs.Output(d.server);
  d.procs.Kill(d.relays[0]);
  // A finished round (its last column written) with the direct client's result only.
  const auto ran_without_relay = [&] {
    auto cols = Columns(metrics);
    for (size_t r = 3; r < cols["wall_s"].size(); ++r) {
      if (cols["returned"][r] == "1") return true;
    }
    return false;
  };
  ASSERT_TRUE(WaitUntil(ran_without_relay, 120)) << d.procs.Output(d.server);
  d.procs.Kill(d.clients[3]);
  ASSERT_TRUE(WaitUntil([&] { return d.procs.Output(d.server).find("every client has left; waiting up to 60") !=
                                     std::string::npos; }, 60))
      << d.procs.Output(d.server);
  MakeDirs(dir + "/again");
  ASSERT_EQ(StartRelay(&d, 0, certs, dir + "/again", listen), listen);
  ASSERT_EQ(d.procs.Wait(d.server, 240), 0) << d.procs.Output(d.server);
  const auto cols = Columns(metrics);
  ASSERT_EQ(cols.at("round").size(), 60u);
  EXPECT_EQ(cols.at("selected").back(), "3") << ReadFile(metrics);
  EXPECT_EQ(cols.at("returned").back(), "3") << ReadFile(metrics);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(d.procs.Wait(d.clients[c], 60), 0) << d.procs.Output(d.clients[c]);
}

// A relay's key cannot pose as the server: its certificate names the relay
// alone (relay-R.fedprof.invalid), and a client checks the name of the
// role it expects at the address it dials: the server's without --relay,
// relay R's with --relay R. A client dialling the relay as if it were the
// server, or the server as if it were the relay, gives up in one line
// naming the name it missed, having sent nothing; a server whose
// certificate is a relay's refuses to start. Each side as it should: the run.
TEST(DeployTest, ARelaysCertificateCannotPoseAsTheServer) {
  const std::string dir = FreshDir("deploy", "relay_identity");
  const std::string certs = MakeCerts(dir, 2, "certs", /*relays=*/1);
  const std::string run = SmallRun(2, 1.0, 1) + kFastFaults;
  const std::string posing = dir + "/posing";
  std::filesystem::copy(certs, posing);
  std::filesystem::copy_file(certs + "/relay-0.crt", posing + "/server.crt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs + "/relay-0.key", posing + "/server.key",
                             std::filesystem::copy_options::overwrite_existing);
  Deployment d;
  const int fake = d.procs.Start(
      kCli, "server --listen 127.0.0.1:0 " + run + " --tls-dir " + posing + " --out " + dir + "/fake",
      dir + "/fake.log");
  EXPECT_EQ(d.procs.Wait(fake, 60), 1);
  EXPECT_NE(
      d.procs.Output(fake).find("posing/server.crt does not name server.fedprof.invalid, which its peers "
                                "check"),
      std::string::npos)
      << d.procs.Output(fake);

  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const std::string relay = StartRelay(&d, 0, certs, dir);
  ASSERT_FALSE(relay.empty());
  const std::string client = "client --id 1 " + run + " --tls-dir " + certs + " --give-up-after 3 --server ";
  const int as_server = d.procs.Start(kCli, client + relay, dir + "/as-server.log");
  const int as_relay = d.procs.Start(kCli, client + d.address + " --relay 0", dir + "/as-relay.log");
  EXPECT_EQ(d.procs.Wait(as_server, 60), 1);
  EXPECT_EQ(d.procs.Wait(as_relay, 60), 1);
  EXPECT_NE(d.procs.Output(as_server).find("Peer name server.fedprof.invalid is not in peer certificate"),
            std::string::npos)
      << d.procs.Output(as_server);
  EXPECT_NE(d.procs.Output(as_relay).find("Peer name relay-0.fedprof.invalid is not in peer certificate"),
            std::string::npos)
      << d.procs.Output(as_relay);
  EXPECT_EQ(d.procs.Output(d.server).find("client 1"), std::string::npos)
      << "nothing of client 1 reached the server";

  StartClients(&d, 0, 1, run + " --tls-dir " + certs + " --relay 0", dir, relay);
  StartClients(&d, 1, 2, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  EXPECT_EQ(Columns(dir + "/server/metrics.csv").at("returned"), (std::vector<std::string>{"2"}));
}

// A relay is trusted with its clients' identities and models, not with
// its sums: one whose count or weight is not that of the results the server
// accepted is refused whole (those results' models are lost to the round),
// one for another relay's batch is refused before it is read, and one that
// no sum of models can be is refused, with its reason, not counted as a
// sum that never came.
TEST(DeployTest, ARelaysSumMustBeOfTheResultsItPassedOn) {
  const std::string dir = FreshDir("deploy", "relay_sums");
  const std::string certs = MakeCerts(dir, 3, "certs", /*relays=*/1);
  const std::string run = SmallRun(3, 1.0, 3) + kFastFaults +
                          " --set strategy.name=fedavg --set deploy.round_timeout_s=10";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int relay = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 0 --tls-dir " + certs +
                                                    " --mode relaysum", dir + "/relay.log");
  StartClients(&d, 2, 3, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  const auto cols = Columns(dir + "/server/metrics.csv");
  ASSERT_EQ(cols.at("round").size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(cols.at("selected")[r], "3");
    EXPECT_EQ(cols.at("returned")[r], "1") << "only the direct client's model counts";
  }
  EXPECT_EQ(cols.at("refused")[0], "2");    // the sum of the wrong weight
  EXPECT_EQ(cols.at("timed_out")[1], "2");  // the sum that never came
  EXPECT_EQ(cols.at("refused")[2], "2");    // the sum no models can make
  EXPECT_EQ(cols.at("timed_out")[2], "0");
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("client 0's model is lost: a partial sum of 1 models of weight 7, not of the 2 "
                     "accepted results it names (weight 2000)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("client 0's model is lost: its relay's sum was refused: relay 0's sum: model sum "
                     "of 1 models of weight -5"),
            std::string::npos)
      << log;
  const std::string said = d.procs.Output(relay);
  EXPECT_NE(said.find("not accepted: a partial sum of 1 models"), std::string::npos) << said;
  EXPECT_NE(said.find("awaits no sum of this relay"), std::string::npos) << said;
  EXPECT_EQ(d.procs.Wait(d.clients[0], 30), 0) << d.procs.Output(d.clients[0]);
}

// A run whose aggregation needs every model takes no relays (they send
// sums): the relay's first sync is refused in one line, and it stops. So
// do FedBuff's, which weighs each model by its own staleness, and a DP run's,
// whose server checks each update's norm.
TEST(DeployTest, ARunThatNeedsEveryModelTakesNoRelays) {
  const std::pair<const char*, const char*> runs[] = {
      {"strategy.aggregator=median", "its aggregation rule needs every client's model (strategy.aggregator)"},
      {"strategy.aggregator=fedbuff",
       "it weighs each client's model by its staleness (strategy.aggregator = fedbuff)"},
      {"dp.mode=central", "it checks that every client clipped its update (dp.mode = central)"}};
  for (const auto& [setting, why] : runs) {
    const std::string name = std::string(setting).substr(std::string(setting).find('=') + 1);
    const std::string dir = FreshDir("deploy", "no_relays_" + name);
    const std::string certs = MakeCerts(dir, 2, "certs", /*relays=*/1);
    const std::string run = SmallRun(2, 1.0, 1) + " --set " + setting + " --set dp.noise=secret";
    Deployment d;
    StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
    const int relay =
        d.procs.Start(kCli,
                      "relay --server " + d.address + " --listen 127.0.0.1:0 --id 0 --tls-dir " + certs +
                          " --give-up-after 30",
                      dir + "/relay.log");
    EXPECT_EQ(d.procs.Wait(relay, 60), 1) << d.procs.Output(relay);
    EXPECT_NE(d.procs.Output(relay).find(std::string("this run takes no relays: ") + why), std::string::npos)
        << d.procs.Output(relay);
  }
}

TEST(DeployTest, FedAvgOverTheNetworkEqualsSimulation) {
  ExpectSameNumbersAsSimulation("fedavg", "--set strategy.name=fedavg");
}

// The strong attacks and the rules against them over the network: ALIE
// crafted on the server's side from the round's honest results against
// FLTrust's root update, clients that plant a backdoor in their own data
// against Bulyan (its success rate measured by the server), and clients
// that flip their labels against centered clipping equal simulation.
TEST(DeployTest, StrongAttacksAndRulesOverTheNetworkEqualSimulation) {
  ExpectSameNumbersAsSimulation("fltrust_alie",
                                "--set strategy.aggregator=fltrust --set attack.share=0.4 --set attack.kind=alie");
  ExpectSameNumbersAsSimulation("bulyan_backdoor",
                                "--set strategy.aggregator=bulyan --set attack.share=0.4 "
                                "--set attack.kind=backdoor --set attack.scale=1");
  ExpectSameNumbersAsSimulation("centered_clipping_label_flip",
                                "--set strategy.aggregator=centered_clipping --set attack.share=0.4 "
                                "--set attack.kind=label_flip");
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
  EXPECT_EQ(deployed.at("dp_epsilon_server"), (std::vector<std::string>(3, "inf")));
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
      "--set secagg.protocol=secagg+ --set secagg.min_clients=2 --set strategy.fraction=1";
  std::string server_dir;
  ExpectSameNumbersAsSimulation("distributed_dp", ddp, &server_dir);
  const auto deployed = Columns(server_dir + "/metrics.csv");
  const auto simulated = Columns(server_dir + "/../sim/metrics.csv");
  EXPECT_EQ(deployed.at("dp_epsilon"), simulated.at("dp_epsilon"));
  EXPECT_EQ(deployed.at("dp_epsilon_server"), simulated.at("dp_epsilon_server"));
  EXPECT_NE(deployed.at("dp_epsilon")[2], "inf");
  EXPECT_NE(deployed.at("dp_epsilon_server")[2], "inf");
  EXPECT_EQ(deployed.at("train_loss"), (std::vector<std::string>(3, "nan"))) << "no loss leaves a client";
  const std::string client_log = ReadFile(server_dir + "/../client-2.log");
  EXPECT_NE(client_log.find("client 2: round 3: contributes; its ledger: 3 contributions: epsilon "),
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
  const std::string run = SmallRun(6, 0.5, 12) +
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
  ExpectSameNumbersAsSimulation("fedprof", "--set strategy.name=fedprof");
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

// A model over gRPC's default 4 MiB message limit (an MLP of 1.2 M values,
// 4.9 MB) goes down and up in chunks, and the run still equals simulate's.
TEST(DeployTest, ModelOverTheMessageLimitCrossesInChunks) {
  std::string server;
  ExpectSameNumbersAsSimulation("large", "--set model.name=mlp --set model.hidden=1536", &server);
  ASSERT_FALSE(server.empty());
  const int64_t values = Summary(server).at("model_parameters");
  EXPECT_GT(values * 4, 4 << 20);
}

// 3 of 10 clients killed in the middle of a round: they time out of it, the
// run finishes all its rounds with the others.
TEST(DeployTest, RunSurvivesClientsKilledMidRound) {
  const std::string dir = FreshDir("deploy", "killed");
  const std::string certs = MakeCerts(dir, 10);
  const std::string run = SmallRun(10, 1.0, 4) + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 10, run + " --tls-dir " + certs, dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 1; }, 120)) << d.procs.Output(d.server);
  // Round 2 is under way: every client has a task.
  for (int k : {2, 5, 7}) d.procs.Kill(d.clients[k]);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  const auto cols = Columns(metrics);
  ASSERT_EQ(cols.at("round").size(), 4u);
  int timed_out = 0;
  for (const std::string& v : cols.at("timed_out")) timed_out += std::stoi(v);
  EXPECT_GE(timed_out, 1) << ReadFile(metrics);
  EXPECT_LE(timed_out, 3) << ReadFile(metrics);
  EXPECT_EQ(cols.at("selected").back(), "7") << "the killed clients are no longer selected";
  EXPECT_EQ(cols.at("returned").back(), "7");
  EXPECT_FALSE(cols.at("accuracy").back().empty());
  for (int k : {0, 1, 3, 4, 6, 8, 9}) EXPECT_EQ(d.procs.Wait(d.clients[k], 30), 0);
}

// A fleet of 300 clients in 3 processes (fedprof client --ids): the process
// holding 30% of them is killed in the middle of a round, and the round
// still reaches its quorum with the others, as do the rounds after it.
TEST(DeployTest, FleetLosesAProcessOfItsClientsMidRound) {
  const std::string dir = FreshDir("deploy", "fleet_kill");
  const std::string certs = MakeCerts(dir, 300);
  // Heartbeats every 0.5 s, silent for 5 s: gone (300 clients share 2 cores).
  const std::string run = SmallRun(300, 1.0, 4) +
                          " --set deploy.heartbeat_s=0.5 --set deploy.heartbeat_timeout_s=5 "
                          "--set deploy.round_timeout_s=120 --set deploy.start_timeout_s=120 "
                          "--set data.train_limit=30000 --set deploy.min_results=150";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  for (const char* ids : {"0-104", "105-194", "195-299"}) {
    d.clients.push_back(d.procs.Start(
        kCli, "client --server " + d.address + " --ids " + ids + " " + run + " --tls-dir " + certs,
        dir + "/clients-" + ids + ".log"));
  }
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 1; }, 240)) << d.procs.Output(d.server);
  d.procs.Kill(d.clients[1]);  // clients 105..194, in round 2
  ASSERT_EQ(d.procs.Wait(d.server, 240), 0) << d.procs.Output(d.server);
  const auto cols = Columns(metrics);
  ASSERT_EQ(cols.at("round").size(), 4u);
  int timed_out = 0;
  for (size_t r = 0; r < 4; ++r) {
    timed_out += std::stoi(cols.at("timed_out")[r]);
    EXPECT_GE(std::stoi(cols.at("returned")[r]), 150) << "round " << r + 1;
  }
  EXPECT_GE(timed_out, 1) << ReadFile(metrics);
  EXPECT_EQ(cols.at("selected").back(), "210") << "the killed process's clients are no longer selected";
  EXPECT_EQ(cols.at("returned").back(), "210");
  EXPECT_EQ(d.procs.Wait(d.clients[0], 30), 0) << d.procs.Output(d.clients[0]);
  EXPECT_EQ(d.procs.Wait(d.clients[2], 30), 0) << d.procs.Output(d.clients[2]);
}

// A client that takes its task's first message and then reads nothing more
// holds neither the round nor the others: once it has taken nothing for
// deploy.heartbeat_timeout_s its task ends (and its stream with it), though
// its heartbeats say it is there.
TEST(DeployTest, AClientThatStopsReadingItsTaskLeavesTheRound) {
  const std::string dir = FreshDir("deploy", "slow_reader");
  const std::string certs = MakeCerts(dir, 4);
  // A model of 4.9 MB: far more than HTTP/2 sends to a reader that reads nothing.
  const std::string run = SmallRun(4, 1.0, 1) + kFastFaults +
                          " --set strategy.name=fedavg --set model.name=mlp --set model.hidden=1536";
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
  const int rogue = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 3 --tls-dir " + certs +
                                                    " --mode slowread", dir + "/slowread.log");
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  const auto cols = Columns(dir + "/server/metrics.csv");
  ASSERT_EQ(cols.at("round").size(), 1u);
  EXPECT_EQ(cols.at("returned")[0], "3");
  EXPECT_EQ(cols.at("timed_out")[0], "1");
  // Well before the round's deadline (60 s).
  EXPECT_LT(std::stod(cols.at("wall_s")[0]), 40.0);
  EXPECT_NE(d.procs.Output(d.server).find("client 3 timed out: took none of its task for"),
            std::string::npos)
      << d.procs.Output(d.server);
  EXPECT_NE(d.procs.Output(rogue).find("reading no more"), std::string::npos) << d.procs.Output(rogue);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
}

// A connection that never speaks (no TLS handshake) is closed by the server
// within its handshake bound (10 s), holding nothing beyond it.
TEST(DeployTest, AConnectionThatNeverSpeaksIsClosed) {
  const std::string dir = FreshDir("deploy", "silent");
  const std::string certs = MakeCerts(dir, 1);
  Deployment d;
  StartServer(&d, SmallRun(1, 1.0, 1) + " --tls-dir " + certs + " --out " + dir + "/server",
              dir + "/server.log");
  const int port = std::stoi(d.address.substr(d.address.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  timeval bound{30 * kTimeScale, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  const auto start = std::chrono::steady_clock::now();
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, 0);  // 0: closed; -1: reset (or our bound)
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  EXPECT_LE(got, 0);
  EXPECT_LT(waited, 20.0 * kTimeScale) << "the server kept a silent connection open";
}

// A certificate from another CA never gets in; a certificate of one client
// cannot speak for another; another protocol version is refused, naming both.
TEST(DeployTest, ForeignCertificatesAndVersionsAreRefused) {
  const std::string dir = FreshDir("deploy", "refused");
  const std::string certs = MakeCerts(dir, 3);
  const std::string foreign = MakeCerts(dir, 3, "foreign");
  // Client 1's certificate and key under client 0's name.
  const std::string swapped = MakeCerts(dir, 0, "swapped");
  std::filesystem::copy_file(certs + "/ca.crt", swapped + "/ca.crt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs + "/client-1.crt", swapped + "/client-0.crt");
  std::filesystem::copy_file(certs + "/client-1.key", swapped + "/client-0.key");
  // The server must outlive the clients' start (loading their data), which
  // a busy machine slows down.
  const std::string run =
      SmallRun(3, 1.0, 1) + " --set deploy.start_timeout_s=" + std::to_string(30 * kTimeScale);
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int outsider = d.procs.Start(
      kCli, "client --server " + d.address + " --id 2 --give-up-after 3 --tls-dir " + foreign + " " + run,
      dir + "/outsider.log");
  const int impostor = d.procs.Start(
      kCli, "client --server " + d.address + " --id 0 --tls-dir " + swapped + " " + run,
      dir + "/impostor.log");
  const int old = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 1 --tls-dir " + certs +
                                                  " --mode version", dir + "/version.log");
  EXPECT_EQ(d.procs.Wait(outsider, 60), 1) << d.procs.Output(outsider);
  EXPECT_NE(d.procs.Output(outsider).find("giving up"), std::string::npos) << d.procs.Output(outsider);
  EXPECT_EQ(d.procs.Wait(impostor, 60), 1);
  EXPECT_NE(d.procs.Output(impostor).find("certificate of client 1 used to speak as client 0"),
            std::string::npos)
      << d.procs.Output(impostor);
  EXPECT_EQ(d.procs.Wait(old, 60), 1);
  EXPECT_NE(d.procs.Output(old).find("speaks protocol version 5, this side version 4"), std::string::npos)
      << d.procs.Output(old);
  // Nobody got in: the server gives up waiting, with one line saying so.
  EXPECT_EQ(d.procs.Wait(d.server, 60), 1);
  EXPECT_NE(d.procs.Output(d.server).find("only 0 of the 3 clients"), std::string::npos)
      << d.procs.Output(d.server);
}

// A run of `run` with clients 0-2 and two rogue clients: 3 pushes NaN, 4 a
// model one value short; the server's log must name both refusals. Its
// metrics.csv, once the server has finished.
std::map<std::string, std::vector<std::string>> RunWithRogues(const std::string& name,
                                                              const std::string& run) {
  const std::string dir = FreshDir("deploy", name);
  const std::string certs = MakeCerts(dir, 5);
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
  const int nan = d.procs.Start(
      ROGUE_CLIENT, "--server " + d.address + " --id 3 --tls-dir " + certs + " --mode nan", dir + "/nan.log");
  const int shape =
      d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 4 --tls-dir " + certs + " --mode shape",
                    dir + "/shape.log");
  EXPECT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("client 3 refused: non-finite value"), std::string::npos) << log;
  EXPECT_NE(log.find("client 4 refused: refused on arrival: announced"), std::string::npos) << log;
  d.procs.Wait(nan, 30);
  d.procs.Wait(shape, 30);
  return Columns(dir + "/server/metrics.csv");
}

// A client pushing NaN and one pushing a model one value short are refused,
// counted and logged; the rounds go on with the others.
TEST(DeployTest, MalformedResultsAreRefusedAndTheRoundGoesOn) {
  const auto cols = RunWithRogues("rogue", SmallRun(5, 1.0, 2) + kFastFaults);
  ASSERT_EQ(cols.at("round").size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(cols.at("selected")[r], "5");
    EXPECT_EQ(cols.at("returned")[r], "3");
    EXPECT_EQ(cols.at("refused")[r], "2");
  }
}

// FedBuff's streamed results pass the same checks as a round's: a model
// of NaN and one a value short are refused in one line each, as they come,
// their senders wait for the next step, and the run steps on the honest
// results.
TEST(DeployTest, MalformedResultsAreRefusedUnderFedBuffAndTheRunGoesOn) {
  const auto cols =
      RunWithRogues("rogue_fedbuff", SmallRun(5, 1.0, 3) +
                                         " --set strategy.name=fedbuff --set fedbuff.buffer=3" + kFastFaults);
  ASSERT_EQ(cols.at("round").size(), 3u);
  int refused = 0;
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(cols.at("returned")[r], "3") << "a step per three usable results";
    // A refused client waits for the next step: each rogue once a step.
    EXPECT_LE(std::stoi(cols.at("refused")[r]), 2);
    refused += std::stoi(cols.at("refused")[r]);
  }
  EXPECT_GE(refused, 2);
}

// A certificate proves who a client is, not what it may claim: a result's
// aggregation weight is the sample count its client registered. A rogue
// registered with 1000 samples claims 2^31 - 1, then 1001, with a poisoned
// model: refused each time, with its id, and the model ends exactly where a
// run whose client 3 sent nothing usable ends.
TEST(DeployTest, AResultCannotChangeItsClientsWeight) {
  std::string hashes[2];
  for (const std::string mode : {"weight", "nan"}) {
    const std::string dir = FreshDir("deploy", "weight_" + mode);
    const std::string certs = MakeCerts(dir, 5);
    const std::string run = SmallRun(5, 1.0, 2) + kFastFaults;
    Deployment d;
    StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
    StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
    const int rogue = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 3 --tls-dir " +
                                                      certs + " --mode " + mode, dir + "/rogue.log");
    const int nan = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 4 --tls-dir " +
                                                    certs + " --mode nan", dir + "/nan.log");
    ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
    const auto cols = Columns(dir + "/server/metrics.csv");
    ASSERT_EQ(cols.at("round").size(), 2u);
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(cols.at("returned")[r], "3");
      EXPECT_EQ(cols.at("refused")[r], "2");
    }
    EXPECT_EQ(Columns(dir + "/server/clients.csv").at("size")[3], "1000");
    hashes[mode == "nan"] = Summary(dir + "/server").at("final_model_sha256");
    if (mode == "weight") {
      const std::string log = d.procs.Output(d.server);
      EXPECT_NE(log.find("round 1: client 3 refused: refused on arrival: claims 2147483647 samples; "
                         "it registered 1000"),
                std::string::npos)
          << log;
      EXPECT_NE(log.find("round 2: client 3 refused: refused on arrival: claims 1001 samples"),
                std::string::npos)
          << log;
      d.procs.Wait(rogue, 30);
      EXPECT_NE(d.procs.Output(rogue).find("result not accepted: refused on arrival: claims"),
                std::string::npos)
          << d.procs.Output(rogue);
    }
    d.procs.Wait(rogue, 30);
    d.procs.Wait(nan, 30);
  }
  EXPECT_EQ(hashes[0].size(), 64u);
  EXPECT_EQ(hashes[0], hashes[1]);
}

// Every string field of every message with a newline that would forge a log
// line, with terminal escapes and at 4 MiB, and NaN in requests' numbers:
// each call is refused, the server's log holds one bounded, escaped line per
// refusal (or a count of the repeats), and a result with a NaN loss is
// answered "not accepted" (before, it was answered accepted, then dropped).
TEST(DeployTest, HostileFieldsAreRefusedInOneBoundedLineEach) {
  const std::string dir = FreshDir("deploy", "hostile");
  const std::string certs = MakeCerts(dir, 2);
  const std::string run = SmallRun(2, 1.0, 1) + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 1, run + " --tls-dir " + certs, dir);
  const int rogue = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 1 --tls-dir " +
                                                    certs + " --mode hostile", dir + "/rogue.log");
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  d.procs.Wait(rogue, 30);
  const std::string said = d.procs.Output(rogue);
  int refused_calls = -1, by_grpc = -1;
  ASSERT_EQ(std::sscanf(said.c_str() + std::min(said.size(), said.find("hostile calls refused: ")),
                        "hostile calls refused: %d, by gRPC before the server's code: %d",
                        &refused_calls, &by_grpc),
            2)
      << said;
  EXPECT_EQ(refused_calls, 21) << said;  // 6 string fields x 3 payloads, 2 NaN, 1 malformed
  // The 4 MiB Register, Heartbeat and PullTask: gRPC reads a unary request
  // whole before the server's code runs, and drops one over the limit there
  // (docs/deploy.md). Every other refusal is the server's, and logged.
  EXPECT_EQ(by_grpc, 3) << said;
  EXPECT_NE(said.find("result not accepted: non-finite training loss"), std::string::npos) << said;

  const std::string log = d.procs.Output(d.server);
  EXPECT_LT(log.size(), 64u << 10);
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find('\r'), std::string::npos);
  int64_t accounted = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 1000u) << line.substr(0, 200);
    EXPECT_NE(line.rfind("warning: round 1: client 0", 0), 0u) << "a forged line: " << line;
    if (line.rfind("warning: client 1 refused: ", 0) == 0) ++accounted;
    const std::string counted = "warning: client 1: ";
    if (line.rfind(counted, 0) == 0) accounted += std::stoll(line.substr(counted.size()));
  }
  EXPECT_EQ(accounted, refused_calls - by_grpc) << log;
  EXPECT_NE(log.find("client 1 refused: Register: "), std::string::npos) << log;
  EXPECT_NE(log.find("round 1: client 1 refused: non-finite training loss"), std::string::npos) << log;
}

// The id is read from a certificate strictly: one CN, client-<canonical
// decimal>. A certificate the CA signed for "client-01", or with two CNs, is
// refused, and the server's log names the peer's address and why.
TEST(DeployTest, CertificatesNameTheirClientStrictly) {
  const std::string dir = FreshDir("deploy", "strict_cn");
  const std::string certs = MakeCerts(dir, 3);
  const std::string run = SmallRun(3, 1.0, 1) + " --set deploy.start_timeout_s=" +
                          std::to_string(20 * kTimeScale);
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  std::vector<int> odd;
  for (const std::string subject : {"/CN=client-01", "/CN=client-1/CN=client-2"}) {
    const std::string own = dir + "/odd" + std::to_string(odd.size());
    MakeDirs(own);
    const std::string sign =
        "cd " + own + " && cp " + certs + "/ca.crt . && "
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out client-1.key && "
        "openssl req -new -key client-1.key -subj '" + subject + "' -out c.csr && "
        "printf 'extendedKeyUsage=clientAuth\n' > ext && "
        "openssl x509 -req -in c.csr -CA " + certs + "/ca.crt -CAkey " + certs +
        "/ca.key -CAcreateserial -out client-1.crt -days 1 -sha256 -extfile ext > /dev/null 2>&1";
    ASSERT_EQ(std::system(sign.c_str()), 0) << sign;
    odd.push_back(d.procs.Start(
        kCli, "client --server " + d.address + " --id 1 --give-up-after 5 --tls-dir " + own + " " + run,
        own + ".log"));
  }
  EXPECT_EQ(d.procs.Wait(odd[0], 60), 1);
  EXPECT_NE(d.procs.Output(odd[0]).find("certificate CN 'client-01' is not client-<id>"),
            std::string::npos)
      << d.procs.Output(odd[0]);
  EXPECT_EQ(d.procs.Wait(odd[1], 60), 1);
  EXPECT_NE(d.procs.Output(odd[1]).find("a certificate with more than one common name"),
            std::string::npos)
      << d.procs.Output(odd[1]);
  EXPECT_EQ(d.procs.Wait(d.server, 60), 1);
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("warning: peer ipv4:127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("(certificate CN 'client-01' is not client-<id> (canonical decimal)) refused: "
                     "Register: "),
            std::string::npos)
      << log;
}

// kill -9 of the server; `server --resume` on the same address; the clients
// find it again by themselves and the run ends as if nothing had happened.
TEST(DeployTest, KilledServerResumesAndClientsReconnect) {
  const std::string dir = FreshDir("deploy", "resume");
  const std::string certs = MakeCerts(dir, 5);
  const std::string run = SmallRun(5, 0.6, 4) + " --set strategy.name=fedprof" + kFastFaults;
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + SmallRun(5, 0.6, 4) + " --set strategy.name=fedprof --out " +
                                    dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);

  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 5, run + " --tls-dir " + certs + " --give-up-after 60", dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 2; }, 120)) << d.procs.Output(d.server);
  d.procs.Kill(d.server);
  const int resumed = d.procs.Start(kCli, "server --resume " + dir + "/server --listen " + d.address +
                                              " --tls-dir " + certs, dir + "/resumed.log");
  ASSERT_EQ(d.procs.Wait(resumed, 180), 0) << d.procs.Output(resumed);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const auto simulated = Columns(dir + "/sim/metrics.csv");
  const auto deployed = Columns(metrics);
  for (const char* col : {"round", "selected", "returned", "train_loss", "accuracy", "loss"}) {
    EXPECT_EQ(deployed.at(col), simulated.at(col)) << col;
  }
}

// Clients that join after round 1 report their profile first (FedProf
// scores them), then take part like the others.
TEST(DeployTest, LateClientsReportAndJoinTheRounds) {
  const std::string dir = FreshDir("deploy", "late");
  const std::string certs = MakeCerts(dir, 5);
  // 80 rounds: long enough for two more client processes to start and
  // register on 2 busy cores.
  const std::string run = SmallRun(5, 1.0, 80) + " --set strategy.name=fedprof " +
                          "--set deploy.min_clients=3 --set report.progress=true" + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 1; }, 120)) << d.procs.Output(d.server);
  StartClients(&d, 3, 5, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  const auto cols = Columns(metrics);
  ASSERT_EQ(cols.at("round").size(), 80u);
  EXPECT_EQ(cols.at("selected").front(), "3");
  EXPECT_EQ(cols.at("selected").back(), "5") << ReadFile(metrics);
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("reports of 3 clients under model version 0"), std::string::npos) << log;
  EXPECT_TRUE(log.find("reports of 2 clients") != std::string::npos ||
              log.find("reports of 1 clients") != std::string::npos)
      << log;
  const auto clients = Columns(dir + "/server/clients.csv");
  EXPECT_NE(clients.at("times_selected")[3], "0");
  EXPECT_NE(clients.at("times_selected")[4], "0");
}

// A TorchScript model (model.file) over the network: the server sends its
// SHA-256, never the module; clients bring their own copy, and one whose
// copy differs, or that has none, is refused at registration in one line
// naming both hashes. The run equals the simulation.
TEST(DeployTest, TorchScriptModelOverTheNetworkEqualsSimulation) {
  const std::string dir = FreshDir("deploy", "model_file");
  const std::string certs = MakeCerts(dir, 3);
  ASSERT_EQ(testing_support::RunPyTorch(dir, "export", R"(
torch.manual_seed(0)
torch.jit.script(lenet5()).save(out + '/lenet.pt')
torch.jit.script(lenet5()).save(out + '/other.pt')
)"),
            0);
  const std::string base = SmallRun(3, 1.0, 2) + " --set strategy.name=fedprof";
  const std::string run = base + " --set model.file=" + dir + "/lenet.pt";
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);

  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int other = d.procs.Start(kCli, "client --server " + d.address + " --id 0 --tls-dir " + certs +
                                            " " + base + " --set model.file=" + dir + "/other.pt",
                                  dir + "/other.log");
  const int none = d.procs.Start(kCli, "client --server " + d.address + " --id 1 --tls-dir " + certs +
                                           " " + base, dir + "/none.log");
  EXPECT_EQ(d.procs.Wait(other, 60), 1) << d.procs.Output(other);
  EXPECT_NE(d.procs.Output(other).find("client 0's model.file has SHA-256 "), std::string::npos)
      << d.procs.Output(other);
  EXPECT_NE(d.procs.Output(other).find("but the server trains the TorchScript module with SHA-256"),
            std::string::npos)
      << d.procs.Output(other);
  EXPECT_EQ(d.procs.Wait(none, 60), 1) << d.procs.Output(none);
  EXPECT_NE(d.procs.Output(none).find("client 1 has no model.file"), std::string::npos)
      << d.procs.Output(none);
  StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const auto simulated = Columns(dir + "/sim/metrics.csv");
  const auto deployed = Columns(dir + "/server/metrics.csv");
  for (const char* col : {"round", "selected", "returned", "refused", "train_loss", "accuracy", "loss"}) {
    EXPECT_EQ(deployed.at(col), simulated.at(col)) << col;
  }
}

// A client that stays alive (heartbeats) but never answers in time leaves
// each round at its deadline, counted as timed out. With a quorum the other
// two meet, the rounds go on; with one they cannot meet, the round is tried
// again among the clients not yet asked, then the server stops in one line.
TEST(DeployTest, RoundDeadlineAndQuorum) {
  const std::string dir = FreshDir("deploy", "quorum");
  const std::string certs = MakeCerts(dir, 3);
  const std::string run = SmallRun(3, 1.0, 2) + " --set deploy.heartbeat_s=0.2 " +
                          "--set deploy.round_timeout_s=" + std::to_string(5 * kTimeScale) + " ";
  auto deploy = [&](Deployment* d, const std::string& name, const std::string& quorum) {
    StartServer(d, run + quorum + " --tls-dir " + certs + " --out " + dir + "/" + name,
                dir + "/" + name + ".log");
    StartClients(d, 0, 2, run + " --tls-dir " + certs, dir + "/" + name);
    d->procs.Start(ROGUE_CLIENT, "--server " + d->address + " --id 2 --tls-dir " + certs +
                                     " --mode slow", dir + "/" + name + "-slow.log");
  };
  Deployment met, missed;
  deploy(&met, "met", "--set deploy.min_results=2");
  deploy(&missed, "missed", "--set deploy.min_results=3 --set deploy.round_attempts=2");

  ASSERT_EQ(met.procs.Wait(met.server, 120), 0) << met.procs.Output(met.server);
  const auto cols = Columns(dir + "/met/metrics.csv");
  ASSERT_EQ(cols.at("round").size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(cols.at("selected")[r], "3");
    EXPECT_EQ(cols.at("returned")[r], "2");
    EXPECT_EQ(cols.at("timed_out")[r], "1");
  }
  EXPECT_NE(met.procs.Output(met.server).find("client 2 timed out"), std::string::npos)
      << met.procs.Output(met.server);

  ASSERT_EQ(missed.procs.Wait(missed.server, 120), 1) << missed.procs.Output(missed.server);
  const std::string log = missed.procs.Output(missed.server);
  EXPECT_NE(log.find("round 1: 2 usable results, fewer than the quorum of 3 (deploy.min_results); "
                     "selecting more clients"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("error: round 1: 2 usable results, fewer than the quorum of 3 "
                     "(deploy.min_results) after 2 attempts; the checkpoint holds round 0"),
            std::string::npos)
      << log;
  EXPECT_EQ(CountRows(dir + "/missed/metrics.csv"), 0);
}

// IDX files in the classic layout: `n` images of side x side pixels and
// labels in [0, 10).
void WriteIdx(const std::string& dir, int n, int side) {
  MakeDirs(dir);
  auto be32 = [](std::ofstream& out, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.put(static_cast<char>((v >> s) & 0xff));
  };
  std::mt19937 gen(7);
  std::ofstream images(dir + "/train-images-idx3-ubyte", std::ios::binary);
  be32(images, 0x803);
  be32(images, n);
  be32(images, side);
  be32(images, side);
  for (int i = 0; i < n * side * side; ++i) images.put(static_cast<char>(gen() & 0xff));
  std::ofstream labels(dir + "/train-labels-idx1-ubyte", std::ios::binary);
  be32(labels, 0x801);
  be32(labels, n);
  for (int i = 0; i < n; ++i) labels.put(static_cast<char>(gen() % 10));
}

// `client --data-dir`: a client trains on its own IDX files instead of the
// config's partition. A directory without them, or with samples of another
// shape than the server's model takes, is refused in one line.
TEST(DeployTest, ClientBringsItsOwnData) {
  const std::string dir = FreshDir("deploy", "own_data");
  const std::string certs = MakeCerts(dir, 4);
  WriteIdx(dir + "/own", 200, 28);
  WriteIdx(dir + "/small", 50, 16);
  const std::string run = SmallRun(4, 1.0, 2) + " --set deploy.min_clients=3" + kFastFaults;
  Processes p;
  const int missing = p.Start(kCli, "client --server 127.0.0.1:1 --id 2 --tls-dir " + certs +
                                        " --data-dir " + dir + "/nothing " + run,
                              dir + "/missing.log");
  EXPECT_EQ(p.Wait(missing, 60), 1);
  EXPECT_NE(p.Output(missing).find("no train.csv and no train-images-idx3-ubyte[.gz]"),
            std::string::npos)
      << p.Output(missing);

  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int small = d.procs.Start(kCli, "client --server " + d.address + " --id 3 --tls-dir " + certs +
                                            " --data-dir " + dir + "/small " + run,
                                  dir + "/small.log");
  EXPECT_EQ(d.procs.Wait(small, 60), 1);
  EXPECT_NE(d.procs.Output(small).find("on samples of shape [1 x 28 x 28], this client's data has [1 x 16 x 16]"),
            std::string::npos)
      << d.procs.Output(small);
  // Client 3 has gone silent; the round starts with the three that train.
  StartClients(&d, 0, 2, run + " --tls-dir " + certs, dir);
  d.clients.push_back(d.procs.Start(kCli, "client --server " + d.address + " --id 2 --tls-dir " +
                                              certs + " --data-dir " + dir + "/own " + run,
                                    dir + "/own.log"));
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const auto cols = Columns(dir + "/server/metrics.csv");
  ASSERT_EQ(cols.at("round").size(), 2u);
  EXPECT_EQ(cols.at("returned").back(), "3");
  EXPECT_EQ(Columns(dir + "/server/clients.csv").at("size")[2], "200");
}

// A table of `rows` rows with columns of very different scales,
// "x1,x2,x3,y" (y a linear function of them plus noise), as CSV; its lines
// without the header are appended to `lines`.
std::string ScaledTable(int rows, uint64_t seed, std::vector<std::string>* lines) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  std::string csv = "x1,x2,x3,y\n";
  for (int i = 0; i < rows; ++i) {
    const double x1 = 100 + 20 * normal(gen), x2 = -5000 + 1000 * normal(gen), x3 = normal(gen);
    const double y = 0.05 * x1 + 0.002 * x2 - x3 + 0.1 * normal(gen);
    const std::string line = FormatDouble(x1, "%.6f") + "," + FormatDouble(x2, "%.4f") + "," +
                             FormatDouble(x3, "%.8f") + "," + FormatDouble(y, "%.8f");
    if (lines) lines->push_back(line);
    csv += line + "\n";
  }
  return csv;
}

// `line` ("x1,x2,x3,y") with its cells in the order `order` names them.
std::string Reordered(const std::string& line, const std::vector<int>& order) {
  const std::vector<std::string> cells = Split(line, ',');
  std::string out;
  for (int c : order) out += (out.empty() ? "" : ",") + cells.at(c);
  return out;
}

// Clients with tables of their own (--data-dir DIR/train.csv, unscaled, one
// with its columns in another order) take the server's feature scaling:
// given the rows simulated client k holds, the deployment trains the
// simulation's model bit for bit, though the test file's columns come in
// yet another order. A client whose columns are named otherwise is refused,
// naming both lists.
TEST(DeployTest, ClientsOwnTablesGoThroughTheServersFeatureScaling) {
  const std::string dir = FreshDir("deploy", "own_tables");
  const std::string certs = MakeCerts(dir, 3);
  std::vector<std::string> rows;
  WriteFileAtomic(dir + "/train.csv", ScaledTable(600, 1, &rows));
  std::vector<std::string> test_rows;
  ScaledTable(200, 2, &test_rows);
  std::string test = "y,x3,x1,x2\n";
  for (const std::string& line : test_rows) test += Reordered(line, {3, 2, 0, 1}) + "\n";
  WriteFileAtomic(dir + "/test.csv", test);
  const std::vector<std::string> sets = {
      "data.name=csv", "data.train_file=" + dir + "/train.csv", "data.test_file=" + dir + "/test.csv",
      "data.targets=y", "data.task=regression", "model.name=mlp", "model.hidden=16", "partition.kind=iid",
      "clients.count=3", "strategy.fraction=1", "rounds=3", "train.epochs=1", "train.batch_size=16",
      "report.progress=false"};
  std::string run = kFastFaults;
  Config config;
  for (const std::string& s : sets) {
    run += " --set " + s;
    config.SetAssignment(s);
  }
  Processes sim;
  const int s = sim.Start(kCli, "simulate " + run + " --out " + dir + "/sim", dir + "/sim.log");
  ASSERT_EQ(sim.Wait(s, 120), 0) << sim.Output(s);

  // Each simulated client's rows, found by their scaled values, written as
  // that client's own file, unscaled; client 1's columns in another order.
  const TrainTest data = LoadData(config.options().data, static_cast<uint64_t>(config.options().seed));
  const Population population(data.train, config.options());
  for (int k = 0; k < 3; ++k) {
    const torch::Tensor x = population.MakeClient(k).data().x;
    const std::vector<int> order = k == 1 ? std::vector<int>{1, 3, 2, 0} : std::vector<int>{0, 1, 2, 3};
    std::string own = Reordered("x1,x2,x3,y", order) + "\n";
    for (int64_t i = 0; i < x.size(0); ++i) {
      const torch::Tensor same = (data.train.x == x[i]).all(1).nonzero();
      ASSERT_EQ(same.size(0), 1) << "row " << i << " of client " << k;
      own += Reordered(rows.at(same[0][0].item<int64_t>()), order) + "\n";
    }
    MakeDirs(dir + "/client-" + std::to_string(k));
    WriteFileAtomic(dir + "/client-" + std::to_string(k) + "/train.csv", own);
  }
  MakeDirs(dir + "/renamed");
  WriteFileAtomic(dir + "/renamed/train.csv", "x1,x9,x3,y\n" + rows[0] + "\n");

  {  // a server of its own, so that the refused client is no client of the run
    Deployment refusing;
    StartServer(&refusing, run + " --tls-dir " + certs + " --out " + dir + "/refusing", dir + "/refusing.log");
    const int renamed = refusing.procs.Start(kCli, "client --server " + refusing.address + " --id 0 --tls-dir " +
                                                       certs + " --data-dir " + dir + "/renamed " + run,
                                             dir + "/renamed.log");
    EXPECT_EQ(refusing.procs.Wait(renamed, 60), 1);
    EXPECT_NE(refusing.procs.Output(renamed).find("feature columns x1, x9, x3; the training file's are x1, x2, x3"),
              std::string::npos)
        << refusing.procs.Output(renamed);
  }
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  for (int k = 0; k < 3; ++k) {
    d.clients.push_back(d.procs.Start(kCli,
                                      "client --server " + d.address + " --id " + std::to_string(k) +
                                          " --tls-dir " + certs + " --data-dir " + dir + "/client-" +
                                          std::to_string(k) + " " + run,
                                      dir + "/client-" + std::to_string(k) + ".log"));
  }
  ASSERT_EQ(d.procs.Wait(d.server, 120), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  EXPECT_EQ(Columns(dir + "/server/metrics.csv").at("rmse"), Columns(dir + "/sim/metrics.csv").at("rmse"));
  EXPECT_EQ(Summary(dir + "/server").at("final_model_sha256"), Summary(dir + "/sim").at("final_model_sha256"));
  EXPECT_GT(Summary(dir + "/server").at("best_accuracy").get<double>(), 0.8);  // R^2
}

// Federated evaluation over the network: every round each client evaluates
// the global model on the data it holds, client 2 on its own files. The
// federated accuracy and loss in metrics.csv are the sample-weighted means
// of the per-client figures in evaluation.csv, client 2's over its 200.
TEST(DeployTest, FederatedEvaluationCoversClientsOwnData) {
  const std::string dir = FreshDir("deploy", "federated_eval");
  const std::string certs = MakeCerts(dir, 3);
  WriteIdx(dir + "/own", 200, 28);
  const std::string run = SmallRun(3, 1.0, 2) +
                          " --set eval.federated_every=1 --set eval.federated_fraction=1" +
                          kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 2, run + " --tls-dir " + certs, dir);
  d.clients.push_back(d.procs.Start(kCli, "client --server " + d.address + " --id 2 --tls-dir " +
                                              certs + " --data-dir " + dir + "/own " + run,
                                    dir + "/own.log"));
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  for (int c : d.clients) EXPECT_EQ(d.procs.Wait(c, 30), 0) << d.procs.Output(c);
  const auto metrics = Columns(dir + "/server/metrics.csv");
  const auto evals = Columns(dir + "/server/evaluation.csv");
  ASSERT_EQ(metrics.at("round").size(), 2u);
  ASSERT_EQ(evals.at("round").size(), 6u);  // 3 clients x 2 rounds
  for (size_t r = 0; r < 2; ++r) {
    int64_t samples = 0, correct = 0;
    double loss = 0;
    for (size_t i = 0; i < evals.at("round").size(); ++i) {
      if (std::stoll(evals.at("round")[i]) != static_cast<int64_t>(r) + 1) continue;
      const int64_t n = std::stoll(evals.at("samples")[i]);
      if (evals.at("client")[i] == "2") {
        EXPECT_EQ(n, 200);
      }
      samples += n;
      correct += std::stoll(evals.at("correct")[i]);
      loss += n * std::stod(evals.at("loss")[i]);
    }
    EXPECT_EQ(metrics.at("fed_clients")[r], "3");
    EXPECT_NEAR(std::stod(metrics.at("fed_accuracy")[r]),
                static_cast<double>(correct) / static_cast<double>(samples), 1e-8);
    EXPECT_NEAR(std::stod(metrics.at("fed_loss")[r]), loss / static_cast<double>(samples), 1e-6);
  }
  EXPECT_GT(Summary(dir + "/server").at("final_federated_accuracy").get<double>(), 0.0);
}

// The server dies while a client computes, so the result's stream breaks on
// its last message (a profile report has no model: its header is its last).
// The client tries again and, the server being gone, gives up with an error.
TEST(DeployTest, ResultForALostServerIsRetriedThenGivenUp) {
  const std::string dir = FreshDir("deploy", "lost_server");
  Deployment d;
  StartServer(&d, "--insecure " + SmallRun(1, 1.0, 1) + " --set strategy.name=fedavg --out " + dir + "/server",
              dir + "/server.log");
  GrpcClientOptions options;
  options.server = d.address;
  options.id = 0;
  options.num_samples = 100;
  options.give_up_s = 1;
  options.progress = false;
  bool computed = false;
  const auto fit = [&](const FitInstructions&) {
    d.procs.Kill(d.server);
    computed = true;
    FitResult report;
    report.ok = true;
    report.num_samples = options.num_samples;
    return report;
  };
  try {
    RunGrpcClient(options, [](const ServerSetup&) {}, fit);
    ADD_FAILURE() << "the client ended normally without its server";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot deliver a result to " + d.address), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(computed);
}

TEST(DeployTest, InsecureIsForLoopbackOnlyAndSaysSo) {
  Processes p;
  const std::string dir = FreshDir("deploy", "insecure");
  const int far = p.Start(kCli, "server --listen 0.0.0.0:0 --insecure --out " + dir + "/x", dir + "/far.log");
  EXPECT_EQ(p.Wait(far, 30), 1);
  EXPECT_NE(p.Output(far).find("--insecure is for loopback addresses only"), std::string::npos)
      << p.Output(far);
  const int none = p.Start(kCli, "server --listen 127.0.0.1:0 --out " + dir + "/y", dir + "/none.log");
  EXPECT_EQ(p.Wait(none, 30), 1);
  EXPECT_NE(p.Output(none).find("--tls-dir DIR"), std::string::npos) << p.Output(none);
  const int loud = p.Start(kCli, "server --listen 127.0.0.1:0 --insecure " + SmallRun(2, 1.0, 1) +
                                     " --set deploy.start_timeout_s=1 --out " + dir + "/z",
                           dir + "/loud.log");
  EXPECT_EQ(p.Wait(loud, 60), 1);
  EXPECT_NE(p.Output(loud).find("NO TLS"), std::string::npos) << p.Output(loud);
}

}  // namespace
}  // namespace fedprof
