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

// What a party demands of a session of n invited clients: its own settings,
// never the server's word. The neighbour count k and the threshold t follow
// from these and n (ChooseGraph).
struct Tolerance {
  double dropout = 0.1;   // δ: at most ⌊δn⌋ clients may drop out (or be declared dropped)
  double corrupt = 0.1;   // γ: at most ⌈γn⌉ clients collude with the server
  int security_bits = 40;     // σ: P[an honest client's secrets leak] <= 2^-σ
  int correctness_bits = 20;  // η: P[the round fails within δ] <= 2^-η
  // The fewest invited clients: the server picks whom it invites, so a
  // server that controls more than ⌈γ · min_clients⌉ clients could fill a
  // small session with them; this bounds what it needs.
  int min_clients = 2;
  // The clients the colluders are counted among: a party's trusted roster
  // (every client the CA certified) or a fleet size it is configured with.
  // The server picks whom it invites, so it may invite all ⌈γ · fleet⌉ of
  // its clients into one session, however small: c never falls with the n
  // it invites. 0: n itself (every client of the federation is invited).
  int fleet = 0;
};

struct GraphParams {
  int neighbors = 0;  // k: neighbours of each client (n − 1 for SecAgg)
  int threshold = 0;  // t: shares that reconstruct a secret (t <= k)
  bool operator==(const GraphParams& o) const {
    return neighbors == o.neighbors && threshold == o.threshold;
  }
  bool operator!=(const GraphParams& o) const { return !(*this == o); }
};

// The clients of n invited that the tolerance lets collude (⌈γ max(n,
// fleet)⌉, at most n, at least one whenever γ > 0) and drop out (⌊δn⌋).
int CorruptBound(int n, const Tolerance& tolerance);
int DropoutBound(int n, const Tolerance& tolerance);

// Whether k neighbours and threshold t keep an honest client's secrets from
// an active server with c = CorruptBound corrupt clients: the server, which
// may show different neighbours different survivor sets, gets at most
// h_1 + X shares of one kind and h_2 + X of the other, where h_1 + h_2 is the
// honest neighbours (at most k − X) and X the corrupt ones; both reach t only
// if k + X >= 2t. So X < 2t − k must hold for every honest client:
// deterministically on the complete graph (X <= c), and for SecAgg+'s
// random graph n · P[X >= 2t − k] <= 2^-σ, X ~ Hypergeometric(n − ⌊δn⌋ − 1,
// c, k), the corrupt neighbours among the fewest others U_1 may hold
// (Bonawitz et al.'s condition for an active server, 2t > k + n_C on the
// complete graph, with Bell et al.'s union bound over clients for the
// sparse one).
bool SecureAgainstActiveServer(Protocol protocol, int n, const Tolerance& tolerance, int neighbors,
                               int threshold);

// k and t for n invited clients. For each even k (SecAgg+; k = n − 1 for
// SecAgg, or once k reaches it) the smallest t that is secure
// (SecureAgainstActiveServer) and, for the choice, correct:
// n · P[X_δ > k − t] <= 2^-η, X_δ ~ Hypergeometric(n−1, ⌊δn⌋, k), so that
// every client keeps t answering neighbours; the smallest such k. Explicit
// `neighbors` / `threshold` (> 0) override the choice and are held to
// security only: the dropouts an explicit t tolerates are the caller's
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
// One client's neighbours in that graph (sorted), in O(n): what a client
// needs of it.
std::vector<int64_t> NeighboursOf(const std::vector<int64_t>& clients, int neighbors, const Bytes& seed,
                                  int64_t client);

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_GRAPH_H_
