#ifndef FEDPROF_TESTS_FEDERATION_H_
#define FEDPROF_TESTS_FEDERATION_H_

// What the federation's end-to-end tests (tests/federation_*_test.cc)
// share: a federation on loopback, its nodes as processes, and its
// operator's commands as an operator types them (--format json, parsed).

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "tests/csv_columns.h"
#include "tests/deployment.h"
#include "tests/processes.h"
#include "tests/run_cli.h"

namespace fedprof::testing_support {

// A federation of `n` nodes' certificates and operator alice's, its state
// in dir/state.
struct Federation {
  std::string dir, certs, address;
  std::string monitor;  // HOST:PORT of its --monitor, when started with one
  Processes procs;
  int server = -1;
  std::vector<int> nodes;

  // Starts `fedprof federation serve` (again: on the same state and port).
  void Start(const std::string& extra = "", int port = 0) {
    server = procs.Start(kCli,
                         "federation serve --state " + dir + "/state --listen 127.0.0.1:" + std::to_string(port) +
                             " --tls-dir " + certs + " --admin alice " + extra,
                         dir + "/federation-" + std::to_string(starts++) + ".log");
    address = procs.WaitForOutput(server, "federation: listening on (127\\.0\\.0\\.1:[0-9]+)", 60);
    ASSERT_FALSE(address.empty()) << procs.Output(server);
    if (extra.find("--monitor ") != std::string::npos) {
      monitor = procs.WaitForOutput(server, "federation: monitor on http://(127\\.0\\.0\\.1:[0-9]+)/", 60);
      ASSERT_FALSE(monitor.empty()) << procs.Output(server);
    }
  }

  // An operator's command, its JSON output parsed (null when it failed:
  // `code` and `output` say how).
  nlohmann::json Operator(const std::string& command, int* code = nullptr, std::string* output = nullptr,
                          const std::string& tls_dir = "") {
    const CliResult r = RunCli("federation " + command + " --server " + address + " --tls-dir " +
                               (tls_dir.empty() ? certs : tls_dir) + " --format json");
    if (code) *code = r.code;
    if (output) *output = r.output;
    if (r.code != 0) return nullptr;
    try {
      return nlohmann::json::parse(r.output);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << command << ": not JSON: " << r.output;
      return nullptr;
    }
  }

  // Enrols clients 0 .. n-1 with their certificates; what `enrol` says (null when it failed).
  nlohmann::json Enrol(int n) {
    std::string command = "enrol";
    for (int k = 0; k < n; ++k) command += " " + certs + "/client-" + std::to_string(k) + ".crt";
    return Operator(command);
  }

  // A node process for client `id` (or `ids`, "A-B"), with `extra` flags.
  int StartNode(const std::string& ids, const std::string& extra = "", const std::string& tls_dir = "") {
    const std::string flag = ids.find('-') == std::string::npos ? "--id " : "--ids ";
    const int node = procs.Start(kCli,
                                 "node --server " + address + " " + flag + ids + " --tls-dir " +
                                     (tls_dir.empty() ? certs : tls_dir) + " " + extra,
                                 dir + "/node-" + ids + "-" + std::to_string(node_starts++) + ".log");
    nodes.push_back(node);
    return node;
  }

  // Waits (fedprof federation wait) until run `run` is over, or has done
  // `rounds` rounds; its status then (null on timeout).
  nlohmann::json WaitFor(int64_t run, double timeout_s, int rounds = 0) {
    return Operator("wait " + std::to_string(run) + " --rounds " + std::to_string(rounds) + " --timeout " +
                    std::to_string(timeout_s * kTimeScale));
  }

  int starts = 0;
  int node_starts = 0;
};

// That the run fetched into `fetched` has the metrics and final model of
// the simulation in `simulated`, bit for bit.
inline void ExpectSameAsSimulated(const std::string& fetched, const std::string& simulated) {
  const auto a = Columns(fetched + "/metrics.csv"), b = Columns(simulated + "/metrics.csv");
  for (const char* col : {"round", "selected", "returned", "train_loss", "accuracy", "loss"}) {
    EXPECT_EQ(a.at(col), b.at(col)) << col;
  }
  EXPECT_EQ(Summary(fetched).at("final_model_sha256"), Summary(simulated).at("final_model_sha256"));
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_FEDERATION_H_
