// End-to-end tests of a deployment under faults and misfits: processes
// killed, clients late or silent, certificates, versions and results that
// are refused, deadlines and quorums.
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

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/client/client.h"
#include "fedprof/protocol/wire.h"
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
using testing_support::kTimeScale;
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
// run finishes all its rounds with the others (clients 0-6, one process).
TEST(DeployTest, RunSurvivesClientsKilledMidRound) {
  const std::string dir = FreshDir("deploy", "killed");
  const std::string certs = MakeCerts(dir, 10);
  const std::string run = SmallRun(10, 1.0, 4) + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  const int survivors =
      d.procs.Start(kCli, "client --server " + d.address + " --ids 0-6 " + run + " --tls-dir " + certs,
                    dir + "/clients-0-6.log");
  StartClients(&d, 7, 10, run + " --tls-dir " + certs, dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 1; }, 120)) << d.procs.Output(d.server);
  // Round 2 is under way: every client has a task.
  for (int k : d.clients) d.procs.Kill(k);
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
  EXPECT_EQ(d.procs.Wait(survivors, 30), 0) << d.procs.Output(survivors);
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
                          "--set deploy.min_results=150";
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

// Nobody gets in without a certificate of the run's CA that names it
// strictly, in the protocol's version: a certificate from another CA, one
// client's certificate speaking for another, another protocol version, a
// certificate the CA signed for "client-01" or with two CNs are each refused
// in one line naming why (the server's log names the peer's address), and a
// connection that never speaks (no TLS handshake) is closed within the
// server's handshake bound (10 s), holding nothing beyond it. One server
// serves every misfit; nobody got in, so it gives up waiting.
TEST(DeployTest, MisfitsAndSilentConnectionsAreRefused) {
  const std::string dir = FreshDir("deploy", "refused");
  const std::string certs = MakeCerts(dir, 3);
  const std::string foreign = MakeCerts(dir, 3, "foreign");
  // Client 1's certificate and key under client 0's name.
  const std::string swapped = MakeCerts(dir, 0, "swapped");
  std::filesystem::copy_file(certs + "/ca.crt", swapped + "/ca.crt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs + "/client-1.crt", swapped + "/client-0.crt");
  std::filesystem::copy_file(certs + "/client-1.key", swapped + "/client-0.key");
  // Certificates of the run's CA with an odd subject.
  std::vector<std::string> odd_dirs;
  for (const std::string subject : {"/CN=client-01", "/CN=client-1/CN=client-2"}) {
    const std::string own = dir + "/odd" + std::to_string(odd_dirs.size());
    MakeDirs(own);
    const std::string sign =
        "cd " + own + " && cp " + certs + "/ca.crt . && "
        "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out client-1.key && "
        "openssl req -new -key client-1.key -subj '" + subject + "' -out c.csr && "
        "printf 'extendedKeyUsage=clientAuth\n' > ext && "
        "openssl x509 -req -in c.csr -CA " + certs + "/ca.crt -CAkey " + certs +
        "/ca.key -CAcreateserial -out client-1.crt -days 1 -sha256 -extfile ext > /dev/null 2>&1";
    ASSERT_EQ(std::system(sign.c_str()), 0) << sign;
    odd_dirs.push_back(own);
  }
  // The server must outlive the clients' start (loading their data), which
  // a busy machine slows down, and the silent connection's bound.
  const std::string run =
      SmallRun(3, 1.0, 1) + " --set deploy.start_timeout_s=" + std::to_string(15 * kTimeScale);
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");

  // The silent connection, opened first.
  const int port = std::stoi(d.address.substr(d.address.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const auto opened = std::chrono::steady_clock::now();

  const int outsider = d.procs.Start(
      kCli, "client --server " + d.address + " --id 2 --give-up-after 3 --tls-dir " + foreign + " " + run,
      dir + "/outsider.log");
  const int impostor = d.procs.Start(
      kCli, "client --server " + d.address + " --id 0 --tls-dir " + swapped + " " + run,
      dir + "/impostor.log");
  const int old = d.procs.Start(ROGUE_CLIENT, "--server " + d.address + " --id 1 --tls-dir " + certs +
                                                  " --mode version", dir + "/version.log");
  std::vector<int> odd;
  for (const std::string& own : odd_dirs) {
    odd.push_back(d.procs.Start(
        kCli, "client --server " + d.address + " --id 1 --give-up-after 5 --tls-dir " + own + " " + run,
        own + ".log"));
  }

  // The server closes the silent connection long before it gives up.
  timeval bound{30 * kTimeScale, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, 0);  // 0: closed; -1: reset (or our bound)
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
  ::close(fd);
  EXPECT_LE(got, 0);
  EXPECT_LT(waited, 20.0 * kTimeScale) << "the server kept a silent connection open";
  EXPECT_TRUE(d.procs.Running(d.server)) << "the server went away before the silent connection's bound";

  EXPECT_EQ(d.procs.Wait(outsider, 60), 1) << d.procs.Output(outsider);
  EXPECT_NE(d.procs.Output(outsider).find("giving up"), std::string::npos) << d.procs.Output(outsider);
  EXPECT_EQ(d.procs.Wait(impostor, 60), 1);
  EXPECT_NE(d.procs.Output(impostor).find("certificate of client 1 used to speak as client 0"),
            std::string::npos)
      << d.procs.Output(impostor);
  EXPECT_EQ(d.procs.Wait(old, 60), 1);
  const std::string versions = "speaks protocol version " + std::to_string(kProtocolVersion + 1) +
                               ", this side version " + std::to_string(kProtocolVersion);
  EXPECT_NE(d.procs.Output(old).find(versions), std::string::npos)
      << d.procs.Output(old);
  EXPECT_EQ(d.procs.Wait(odd[0], 60), 1);
  EXPECT_NE(d.procs.Output(odd[0]).find("certificate CN 'client-01' is not client-<id>"),
            std::string::npos)
      << d.procs.Output(odd[0]);
  EXPECT_EQ(d.procs.Wait(odd[1], 60), 1);
  EXPECT_NE(d.procs.Output(odd[1]).find("a certificate with more than one common name"),
            std::string::npos)
      << d.procs.Output(odd[1]);
  // Nobody got in: the server gives up waiting, with one line saying so.
  EXPECT_EQ(d.procs.Wait(d.server, 60 * kTimeScale), 1);
  const std::string log = d.procs.Output(d.server);
  EXPECT_NE(log.find("only 0 of the 3 clients"), std::string::npos) << log;
  EXPECT_NE(log.find("warning: peer ipv4:127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("(certificate CN 'client-01' is not client-<id> (canonical decimal)) refused: "
                     "Register: "),
            std::string::npos)
      << log;
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
  // 40 rounds (over 10 s): long enough for two more client processes to
  // start and register on 2 busy cores.
  const std::string run = SmallRun(5, 1.0, 40) + " --set strategy.name=fedprof " +
                          "--set deploy.min_clients=3 --set report.progress=true" + kFastFaults;
  Deployment d;
  StartServer(&d, run + " --tls-dir " + certs + " --out " + dir + "/server", dir + "/server.log");
  StartClients(&d, 0, 3, run + " --tls-dir " + certs, dir);
  const std::string metrics = dir + "/server/metrics.csv";
  ASSERT_TRUE(WaitUntil([&] { return CountRows(metrics) >= 1; }, 120)) << d.procs.Output(d.server);
  StartClients(&d, 3, 5, run + " --tls-dir " + certs, dir);
  ASSERT_EQ(d.procs.Wait(d.server, 180), 0) << d.procs.Output(d.server);
  const auto cols = Columns(metrics);
  ASSERT_EQ(cols.at("round").size(), 40u);
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
  // Its clients never came: the timeout as given, and who is missing.
  EXPECT_NE(p.Output(loud).find("were available within 1 s (deploy.start_timeout_s); not registered: clients 0, 1"),
            std::string::npos)
      << p.Output(loud);
  // A client without its keys is told how a client makes them, on its own machine.
  MakeDirs(dir + "/no-keys");
  std::filesystem::copy_file(MakeCerts(dir, 2) + "/ca.crt", dir + "/no-keys/ca.crt");
  const int keyless = p.Start(kCli, "client --server 127.0.0.1:1 --id 0 --tls-dir " + dir + "/no-keys " +
                                        SmallRun(2, 1.0, 1),
                              dir + "/keyless.log");
  EXPECT_EQ(p.Wait(keyless, 60), 1);
  EXPECT_NE(p.Output(keyless).find("no such file (a client makes its keys on its own machine, fedprof keygen --id K"),
            std::string::npos)
      << p.Output(keyless);
}

}  // namespace
}  // namespace fedprof
