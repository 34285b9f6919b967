#ifndef FEDPROF_TESTS_SIMULATE_SUMMARY_H_
#define FEDPROF_TESTS_SIMULATE_SUMMARY_H_

// A short simulation run in the test's process, for tests that compare runs
// by their summary (final model hash, accuracy) or their outputs (what a
// deployment or a resumed run must equal).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/files.h"
#include "fedprof/run/simulation.h"
#include "tests/test_dirs.h"

namespace fedprof::testing_support {

using Settings = std::vector<std::pair<std::string, std::string>>;

// Runs `simulate` with `defaults`, then `sets`, applied in order, into a
// fresh directory of the test's temporary directory named `name`; returns
// its summary.json.
inline nlohmann::json SimulateSummary(const std::string& name, const Settings& defaults,
                                      const Settings& sets = {}) {
  Config config;
  for (const Settings* list : {&defaults, &sets}) {
    for (const auto& [k, v] : *list) config.Set(k, v, "test");
  }
  const std::string out = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(out);
  RunSimulation(config, out);
  std::ifstream in(out + "/summary.json");
  return nlohmann::json::parse(in);
}

// "--set a=b --set c=d" as a config; any other word fails the test.
inline Config ConfigOf(const std::string& sets) {
  Config config;
  std::istringstream in(sets);
  for (std::string word; in >> word;) {
    if (word == "--set" && in >> word) {
      config.SetAssignment(word, "the test");
    } else {
      ADD_FAILURE() << "not a --set key=value: " << word;
    }
  }
  return config;
}

// The simulation of `sets` (in this process, as `fedprof simulate` runs
// it), into dir/name: what a deployment's or a federation's run of the same
// config must equal.
inline std::string Simulated(const std::string& dir, const std::string& name, const std::string& sets) {
  const std::string out = dir + "/" + name;
  RunSimulation(ConfigOf(sets), out);
  return out;
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_SIMULATE_SUMMARY_H_
