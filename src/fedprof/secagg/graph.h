#ifndef FEDPROF_SECAGG_GRAPH_H_
#define FEDPROF_SECAGG_GRAPH_H_

// Who masks with whom and who holds whose shares. SecAgg (Bonawitz et al.,
// CCS 2017) uses the complete graph; SecAgg+ (Bell et al., CCS 2020, §3) a
// Harary graph H(n, k) (every node joined to the k/2 nearest on either side
// of a ring) over a random permutation of the clients, so that each client
// masks with and shares among only k = O(log n) neighbours.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fedprof/secagg/crypto.h"

namespace fedprof::secagg {

enum class Protocol { kSecAgg, kSecAggPlus };
Protocol ParseProtocol(const std::string& name);  // "secagg", "secagg+"
std::string ProtocolName(Protocol protocol);

// What a session tolerates and how sure it must be; the neighbour count k
// and the threshold t follow from these and n (ChooseGraph).
struct Tolerance {
  double dropout = 0.1;   // δ: fraction of the n clients that may drop out
  double corrupt = 0.1;   // γ: fraction that may collude with the server
  int security_bits = 40;     // σ: P[privacy fails] <= 2^-σ
  int correctness_bits = 20;  // η: P[the round fails within δ] <= 2^-η
};

struct GraphParams {
  int neighbors = 0;  // k: neighbours of each client (n − 1 for SecAgg)
  int threshold = 0;  // t: shares that reconstruct a secret (t <= k)
};

// k and t for n clients. For each even k (SecAgg+; k = n − 1 for SecAgg, or
// once k reaches it) the smallest t with
//   security:    n · P[X_γ >= t] <= 2^-σ, X_γ ~ Hypergeometric(n−1, ⌊γn⌋, k),
//                the corrupt neighbours of an honest client (they, with the
//                server, must not hold t shares of its secrets), and
//                t > k/2, so that no two disjoint answers can both reach t;
//   correctness: n · P[X_δ > k − t] <= 2^-η, X_δ ~ Hypergeometric(n−1, ⌊δn⌋, k),
//                so that every client keeps t answering neighbours;
// the smallest such k. This is the union bound over clients of Bell et al.'s
// Lemma 4.3/4.4 with sampling without replacement. Explicit `neighbors` /
// `threshold` (> 0) override the choice and are held to the security
// conditions only: the dropouts an explicit t tolerates are the caller's
// choice. Throws fedprof::Error when nothing satisfies the conditions.
GraphParams ChooseGraph(Protocol protocol, int n, const Tolerance& tolerance, int neighbors = 0,
                        int threshold = 0);

// log2 P[X >= x], X ~ Hypergeometric(population, successes, draws).
double Log2HypergeometricTail(int population, int successes, int draws, int x);

// The neighbour sets of `clients` (distinct ids): the complete graph when
// k >= n − 1, otherwise H(n, k) over the permutation of the sorted ids that
// the AES-CTR stream of `seed` draws (Fisher–Yates). Every party computes
// the same graph from the same public inputs.
std::map<int64_t, std::vector<int64_t>> Neighbours(const std::vector<int64_t>& clients,
                                                    int neighbors, const Bytes& seed);

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_GRAPH_H_
