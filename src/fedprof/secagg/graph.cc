#include "fedprof/secagg/graph.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof::secagg {
namespace {

double LogChoose(int n, int k) {
  return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0);
}

void CheckTolerance(int n, const Tolerance& tol) {
  if (n < 2) throw Error("secagg: " + std::to_string(n) + " clients, at least 2 needed");
  if (!(tol.dropout >= 0 && tol.dropout < 1) || !(tol.corrupt >= 0 && tol.corrupt < 1) ||
      tol.security_bits < 1 || tol.security_bits > 256 || tol.correctness_bits < 1 ||
      tol.correctness_bits > 256) {
    throw Error("secagg: tolerance out of range (dropout and corrupt fractions in [0, 1), "
                "security and correctness bits in 1..256)");
  }
}

}  // namespace

Protocol ParseProtocol(const std::string& name) {
  if (name == "secagg") return Protocol::kSecAgg;
  if (name == "secagg+") return Protocol::kSecAggPlus;
  throw Error("secagg: unknown protocol '" + name + "', expected secagg or secagg+");
}

std::string ProtocolName(Protocol protocol) {
  return protocol == Protocol::kSecAgg ? "secagg" : "secagg+";
}

double Log2HypergeometricTail(int population, int successes, int draws, int x) {
  const int hi = std::min(successes, draws);
  const int lo = std::max(x, std::max(0, draws - (population - successes)));
  if (lo > hi) return -INFINITY;
  // log-sum-exp of the pmf over lo..hi, in natural logs.
  std::vector<double> terms;
  for (int i = lo; i <= hi; ++i) {
    terms.push_back(LogChoose(successes, i) + LogChoose(population - successes, draws - i) -
                    LogChoose(population, draws));
  }
  const double top = *std::max_element(terms.begin(), terms.end());
  double sum = 0;
  for (double t : terms) sum += std::exp(t - top);
  return (top + std::log(sum)) / std::log(2.0);
}

int CorruptBound(int n, const Tolerance& tol) {
  const double among = std::max(n, tol.fleet);
  return std::min(n, static_cast<int>(std::ceil(tol.corrupt * among - 1e-9)));
}

int DropoutBound(int n, const Tolerance& tol) {
  return static_cast<int>(std::floor(tol.dropout * n + 1e-9));
}

bool SecureAgainstActiveServer(Protocol protocol, int n, const Tolerance& tol, int k, int t) {
  CheckTolerance(n, tol);
  const int margin = 2 * t - k;  // the corrupt neighbours must stay below it
  if (k < 1 || t < 1 || t > k || margin <= 0) return false;
  const int corrupt = CorruptBound(n, tol);
  // The others in the smallest U_1 a client accepts.
  const int others = std::max(1, n - DropoutBound(n, tol) - 1);
  if (protocol == Protocol::kSecAgg || k >= others) return std::min(corrupt, k) < margin;
  return Log2HypergeometricTail(others, std::min(corrupt, others), k, margin) +
             std::log2(static_cast<double>(n)) <=
         -tol.security_bits;
}

GraphParams ChooseGraph(Protocol protocol, int n, const Tolerance& tol, int neighbors,
                        int threshold) {
  CheckTolerance(n, tol);
  const int complete = n - 1;
  if (neighbors < 0 || threshold < 0 || neighbors > complete) {
    throw Error("secagg: " + std::to_string(neighbors) + " neighbours or threshold " +
                std::to_string(threshold) + " for " + std::to_string(n) + " clients");
  }
  if (protocol == Protocol::kSecAgg && neighbors != 0 && neighbors != complete) {
    throw Error("secagg: SecAgg uses the complete graph, " + std::to_string(complete) +
                " neighbours, not " + std::to_string(neighbors));
  }
  const int dropped = DropoutBound(n, tol);
  const double log2n = std::log2(static_cast<double>(n));
  auto secure = [&](int k, int t) { return SecureAgainstActiveServer(protocol, n, tol, k, t); };
  auto correct = [&](int k, int t) {
    return Log2HypergeometricTail(n - 1, dropped, k, k - t + 1) + log2n <= -tol.correctness_bits;
  };
  // Explicit values are held to security only (the dropouts they tolerate
  // are theirs to decide); chosen ones to correctness too.
  const bool chosen_by_tolerance = neighbors == 0 && threshold == 0;
  auto fits = [&](int k) -> GraphParams {
    if (threshold > 0) {
      return threshold <= k && secure(k, threshold) ? GraphParams{k, threshold} : GraphParams{};
    }
    // The smallest secure t, by bisection: security only grows with t.
    int lo = k / 2 + 1, hi = k + 1;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (secure(k, mid)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    if (lo > k) return {};
    return !chosen_by_tolerance || correct(k, lo) ? GraphParams{k, lo} : GraphParams{};
  };
  if (!chosen_by_tolerance) {
    if (neighbors == 0) neighbors = protocol == Protocol::kSecAgg ? complete : 0;
    if (neighbors > 0) {
      if (neighbors != complete && neighbors % 2 != 0) {
        throw Error("secagg: a Harary graph needs an even neighbour count, not " +
                    std::to_string(neighbors));
      }
      const GraphParams chosen = fits(neighbors);
      if (chosen.neighbors == 0) {
        throw Error("secagg: " + std::to_string(neighbors) + " neighbours and threshold " +
                    std::to_string(threshold) + " are not secure for " + std::to_string(n) +
                    " clients of which " + std::to_string(CorruptBound(n, tol)) +
                    " may be corrupt (twice the threshold must exceed the neighbours plus, "
                    "almost surely, the corrupt ones among them)");
      }
      return chosen;
    }
    // SecAgg+ with an explicit threshold: the smallest k it is secure for.
    for (int k = 2; k < complete; k += 2) {
      const GraphParams chosen = fits(k);
      if (chosen.neighbors != 0) return chosen;
    }
    const GraphParams chosen = fits(complete);
    if (chosen.neighbors == 0) {
      throw Error("secagg: threshold " + std::to_string(threshold) + " is not secure for " +
                  std::to_string(n) + " clients");
    }
    return chosen;
  }
  if (protocol == Protocol::kSecAggPlus) {
    for (int k = 2; k < complete; k += 2) {
      const GraphParams chosen = fits(k);
      if (chosen.neighbors != 0) return chosen;
    }
  }
  const GraphParams chosen = fits(complete);
  if (chosen.neighbors == 0) {
    throw Error("secagg: no threshold lets " + std::to_string(n) + " invited clients tolerate " +
                std::to_string(DropoutBound(n, tol)) + " dropouts (secagg.dropout = " +
                FormatDouble(tol.dropout) + ") and " + std::to_string(CorruptBound(n, tol)) +
                " colluders (secagg.corrupt = " + FormatDouble(tol.corrupt) +
                (tol.fleet > n ? " of a fleet of " + std::to_string(tol.fleet) : std::string()) +
                "): invite more clients (strategy.fraction), or assume fewer colluders (secagg.corrupt, "
                "secagg.fleet)");
  }
  return chosen;
}

namespace {

// The clients in ring order: sorted, then (for a Harary graph) permuted by
// Fisher–Yates with the PRG's words of `seed`, rejection-free: a 128-bit
// word mod i + 1 has a bias below 2^-100.
std::vector<int64_t> RingOrder(const std::vector<int64_t>& clients, int neighbors, const Bytes& seed) {
  std::vector<int64_t> order(clients);
  std::sort(order.begin(), order.end());
  if (std::adjacent_find(order.begin(), order.end()) != order.end()) {
    throw Error("secagg: a client listed twice in the neighbour graph");
  }
  const int n = static_cast<int>(order.size());
  if (neighbors >= n - 1) return order;
  if (neighbors < 2 || neighbors % 2 != 0) {
    throw Error("secagg: a Harary graph of " + std::to_string(neighbors) + " neighbours");
  }
  std::vector<Word> random(order.size());
  AddPrg(Hkdf(seed, "fedprof secagg+ graph"), +1, random);
  for (size_t i = order.size(); i-- > 1;) {
    std::swap(order[i], order[static_cast<size_t>(random[i] % (i + 1))]);
  }
  return order;
}

// The neighbours of the client at `i` of `order`, sorted.
std::vector<int64_t> AroundOf(const std::vector<int64_t>& order, int neighbors, size_t i) {
  const int n = static_cast<int>(order.size());
  std::vector<int64_t> out;
  if (neighbors >= n - 1) {
    for (size_t j = 0; j < order.size(); ++j) {
      if (j != i) out.push_back(order[j]);
    }
    return out;
  }
  for (int d = 1; d <= neighbors / 2; ++d) {
    out.push_back(order[(static_cast<int>(i) + d) % n]);
    out.push_back(order[(static_cast<int>(i) - d + n) % n]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::map<int64_t, std::vector<int64_t>> Neighbours(const std::vector<int64_t>& clients,
                                                    int neighbors, const Bytes& seed) {
  const std::vector<int64_t> order = RingOrder(clients, neighbors, seed);
  std::map<int64_t, std::vector<int64_t>> graph;
  for (size_t i = 0; i < order.size(); ++i) graph[order[i]] = AroundOf(order, neighbors, i);
  return graph;
}

std::vector<int64_t> NeighboursOf(const std::vector<int64_t>& clients, int neighbors, const Bytes& seed,
                                  int64_t client) {
  const std::vector<int64_t> order = RingOrder(clients, neighbors, seed);
  const auto it = std::find(order.begin(), order.end(), client);
  if (it == order.end()) throw Error("secagg: client " + std::to_string(client) + " is not in the graph");
  return AroundOf(order, neighbors, static_cast<size_t>(it - order.begin()));
}

}  // namespace fedprof::secagg
