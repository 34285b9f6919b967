#include "fedprof/selection/clustered_selector.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

double CosineDistance(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || b.empty()) return 1.0;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0 || bb == 0) return 1.0;
  return 1.0 - ab / std::sqrt(aa * bb);
}

}  // namespace

std::vector<int> AverageLinkage(int n, int k, const std::function<double(int, int)>& distance) {
  // Lance-Williams updates on a full distance matrix: O(n^3) in the worst
  // case, well under a second a round for the papers' 500 clients.
  std::vector<std::vector<double>> d(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) d[i][j] = d[j][i] = distance(i, j);
  }
  std::vector<int> size(n, 1), owner(n);
  std::vector<char> alive(n, 1);
  for (int i = 0; i < n; ++i) owner[i] = i;
  for (int clusters = n; clusters > std::max(k, 1); --clusters) {
    int best_a = -1, best_b = -1;
    double best = std::numeric_limits<double>::infinity();
    for (int a = 0; a < n; ++a) {
      if (!alive[a]) continue;
      for (int b = a + 1; b < n; ++b) {
        if (alive[b] && d[a][b] < best) {
          best = d[a][b];
          best_a = a;
          best_b = b;
        }
      }
    }
    for (int c = 0; c < n; ++c) {
      if (!alive[c] || c == best_a || c == best_b) continue;
      const double merged = (size[best_a] * d[best_a][c] + size[best_b] * d[best_b][c]) /
                            (size[best_a] + size[best_b]);
      d[best_a][c] = d[c][best_a] = merged;
    }
    size[best_a] += size[best_b];
    alive[best_b] = 0;
    for (int i = 0; i < n; ++i) {
      if (owner[i] == best_b) owner[i] = best_a;
    }
  }
  // Number clusters by their smallest member.
  std::vector<int> label(n, -1), cluster(n);
  int next = 0;
  for (int i = 0; i < n; ++i) {
    if (label[owner[i]] < 0) label[owner[i]] = next++;
    cluster[i] = label[owner[i]];
  }
  return cluster;
}

ClusteredSelector::ClusteredSelector(const ClusteredOptions& options, int num_clients)
    : options_(options) {
  if (num_clients > kMaxClusteredClients) {
    throw Error("strategy.selector: clustered sampling compares every pair of clients; " +
                std::to_string(num_clients) + " clients is above its limit of " +
                std::to_string(kMaxClusteredClients));
  }
  sketches_.resize(num_clients);
}

std::string ClusteredSelector::CheckResult(const FitResult& result) const {
  if (result.sketch.size() != static_cast<size_t>(options_.sketch_dim)) {
    return "update sketch has " + std::to_string(result.sketch.size()) + " values, expected " +
           std::to_string(options_.sketch_dim);
  }
  for (float v : result.sketch) {
    if (!std::isfinite(v)) return "non-finite value in the update sketch";
  }
  return "";
}

void ClusteredSelector::Observe(const FitResult& result) {
  if (!result.sketch.empty()) sketches_.at(result.client_id) = result.sketch;
}

std::vector<int> ClusteredSelector::Select(const SelectionContext& context, Rng& rng) {
  const std::vector<ClientInfo>& clients = *context.clients;
  const int n = static_cast<int>(clients.size());
  const int k = std::min(context.num_to_select, n);
  const std::vector<int> cluster = AverageLinkage(n, k, [&](int a, int b) {
    return CosineDistance(sketches_.at(clients[a].id), sketches_.at(clients[b].id));
  });
  std::vector<int> chosen;
  for (int c = 0; c < k; ++c) {
    std::vector<double> weights(n, 0.0);
    for (int i = 0; i < n; ++i) {
      if (cluster[i] == c) weights[i] = static_cast<double>(clients[i].num_samples);
    }
    const std::vector<int> one = SampleByWeight(weights, 1, /*with_replacement=*/false, rng);
    chosen.insert(chosen.end(), one.begin(), one.end());
  }
  std::sort(chosen.begin(), chosen.end());
  return IdsAt(context, chosen);
}

std::string ClusteredSelector::SaveState() const {
  nlohmann::json sketches = nlohmann::json::array();
  for (const auto& s : sketches_) sketches.push_back(EncodeFloats(s));
  return nlohmann::json({{"sketches", sketches}}).dump();
}

void ClusteredSelector::LoadState(const std::string& state) {
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    const auto& sketches = j.at("sketches");
    if (sketches.size() != sketches_.size()) {
      throw Error("checkpoint: clustered-sampling state holds " + std::to_string(sketches.size()) +
                  " clients, the run has " + std::to_string(sketches_.size()));
    }
    for (size_t i = 0; i < sketches.size(); ++i) sketches_[i] = DecodeFloats(sketches[i]);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: clustered-sampling state: ") + e.what());
  }
}

}  // namespace fedprof
