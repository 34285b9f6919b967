// End-to-end tests of deployed clients that bring their own data: IDX
// images and CSV tables of their own, standardised as the server's are,
// and federated evaluation on them.
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
using testing_support::kCli;
using testing_support::Processes;
using testing_support::SmallRun;
using testing_support::Summary;
using testing_support::Deployment;
using testing_support::kFastFaults;
using testing_support::MakeCerts;
using testing_support::StartClients;
using testing_support::StartServer;

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

}  // namespace
}  // namespace fedprof
