// A program outside FedProf's tree, built against the installed library (tests/install_test.sh):
// it registers a selector of its own, runs a small simulation that uses it, and checks that the
// run selected the clients it chose.
//
//   outside DATA_DIR OUT_DIR   (DATA_DIR: MNIST's IDX files)
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/run/simulation.h"
#include "fedprof/selection/selector.h"
#include "fedprof/strategy/registry.h"

namespace {

constexpr int kRounds = 2;

// Every selection the run asked for: calls to Select and, per client id, how often it was chosen.
struct Tally {
  int calls = 0;
  std::vector<int> times;
};

// The K available clients chosen least often so far, the smaller id first among equals: no
// randomness, so the test knows what the run must have done.
class RoundRobinSelector : public fedprof::Selector {
 public:
  RoundRobinSelector(int num_clients, std::shared_ptr<Tally> tally) : tally_(std::move(tally)) {
    tally_->times.assign(num_clients, 0);
  }

  std::vector<int> Select(const fedprof::SelectionContext& context, fedprof::Rng& rng) override {
    (void)rng;
    ++tally_->calls;
    std::vector<int> ids;
    for (const fedprof::ClientInfo& client : *context.clients) ids.push_back(client.id);
    std::stable_sort(ids.begin(), ids.end(),
                     [this](int a, int b) { return tally_->times.at(a) < tally_->times.at(b); });
    ids.resize(std::min<size_t>(ids.size(), context.num_to_select));
    std::sort(ids.begin(), ids.end());
    for (int id : ids) ++tally_->times.at(id);
    return ids;
  }

 private:
  std::shared_ptr<Tally> tally_;
};

// clients.csv's times_selected column, one value per client id.
std::vector<int> TimesSelected(const std::string& path) {
  std::ifstream in(path);
  std::string line, cell;
  if (!std::getline(in, line)) throw std::runtime_error(path + ": missing or empty");
  int column = -1;
  std::istringstream header(line);
  for (int i = 0; std::getline(header, cell, ','); ++i) {
    if (cell == "times_selected") column = i;
  }
  if (column < 0) throw std::runtime_error(path + ": no times_selected column");
  std::vector<int> times;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line);
    while (std::getline(row, cell, ',')) cells.push_back(cell);
    times.push_back(std::stoi(cells.at(column)));
  }
  return times;
}

int Run(const std::string& data_dir, const std::string& out_dir) {
  auto tally = std::make_shared<Tally>();
  fedprof::RegisterSelector("outside.round_robin", [tally](const fedprof::RunOptions& options,
                                                          const fedprof::StrategyContext& context) {
    (void)options;
    return std::make_unique<RoundRobinSelector>(context.num_clients, tally);
  });

  // Registered names are values of strategy.selector from here on.
  fedprof::Config config;
  for (const char* assignment :
       {"data.name=mnist", "data.train_limit=1000", "data.test_limit=200", "clients.count=5",
        "strategy.fraction=0.6", "train.epochs=1", "partition.kind=iid", "report.progress=false",
        "strategy.selector=outside.round_robin"}) {
    config.SetAssignment(assignment, "outside");
  }
  config.Set("data.dir", data_dir, "outside");
  config.Set("rounds", std::to_string(kRounds), "outside");

  fedprof::RunSimulation(config, out_dir);

  if (tally->calls != kRounds) {
    std::fprintf(stderr, "outside.round_robin: Select called %d times, expected %d\n", tally->calls,
                 kRounds);
    return 1;
  }
  if (!std::filesystem::exists(out_dir + "/summary.json")) {
    std::fprintf(stderr, "%s/summary.json: missing\n", out_dir.c_str());
    return 1;
  }
  if (TimesSelected(out_dir + "/clients.csv") != tally->times) {
    std::fprintf(stderr, "%s/clients.csv: times_selected differs from the selector's choices\n",
                 out_dir.c_str());
    return 1;
  }
  std::printf("outside.round_robin: Select called %d times\n", tally->calls);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATA_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    return Run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
