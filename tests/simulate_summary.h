#ifndef FEDPROF_TESTS_SIMULATE_SUMMARY_H_
#define FEDPROF_TESTS_SIMULATE_SUMMARY_H_

// A short simulation run in the test's process, for tests that compare runs
// by their summary (final model hash, accuracy).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_SIMULATE_SUMMARY_H_
