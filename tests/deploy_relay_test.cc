// End-to-end tests of relays (`fedprof relay`) between the server and its
// clients, processes on loopback with mutual TLS.
#include <gtest/gtest.h>
#include <torch/torch.h>
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
using testing_support::FreePort;
using testing_support::kCli;
using testing_support::Processes;
using testing_support::SmallRun;
using testing_support::Summary;
using testing_support::WaitUntil;
using testing_support::Deployment;
using testing_support::kFastFaults;
using testing_support::MakeCerts;
using testing_support::StartClients;
using testing_support::StartRelay;
using testing_support::StartServer;
using testing_support::CountRows;

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
  // Killed in a round or between two, the last client leaves the server waiting for one to come back.
  ASSERT_TRUE(WaitUntil([&] { return d.procs.Output(d.server).find("; waiting up to 60 s (deploy.start_timeout_s) for one to come back") !=
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

}  // namespace
}  // namespace fedprof
