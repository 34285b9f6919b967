#ifndef FEDPROF_SECAGG_IN_PROCESS_H_
#define FEDPROF_SECAGG_IN_PROCESS_H_

// One secure-aggregation session run in process: the clients' and the
// server's state machines exchange the very messages a deployment sends,
// each encoded to its wire bytes and decoded (and checked) again, so that a
// simulation's cost and correctness are those of the deployment. Dropouts
// and a misbehaving server or client are injected between the rounds.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fedprof/secagg/client.h"
#include "fedprof/secagg/server.h"

namespace fedprof::secagg {

// Masked inputs travel in chunks of 64 Ki words (1 MiB), below gRPC's limit.
constexpr size_t kChunkWords = size_t{1} << 16;

// Who stops answering, and when.
struct Dropouts {
  std::set<int64_t> before_roster;        // advertised keys only: the session fails
  std::set<int64_t> before_shares;        // signed U_1 (not in U_2)
  std::set<int64_t> before_masked_input;  // shared keys (in U_2 \ U_3)
  std::set<int64_t> after_masked_input;   // in U_3, never signs nor unmasks
  std::set<int64_t> before_unmasking;     // in U_4, never unmasks
};

// Tampering between the rounds, for tests: each may change a message in
// flight (before it is encoded).
struct Interceptors {
  std::function<void(int64_t to, Roster&)> roster;
  std::function<void(int64_t to, KeyDirectory&)> key_directory;
  std::function<void(ShareKeys&)> share_keys;
  std::function<void(int64_t to, ShareBundle&)> share_bundle;
  std::function<void(int64_t to, UnmaskRequest&)> unmask_request;
  std::function<void(UnmaskResponse&)> unmask_response;
};

// Bytes on the wire (serialised protobuf) and compute time (the thread's
// CPU seconds in the party's own steps, its decoding of what it receives
// included).
struct PartyCost {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  double seconds = 0;
};

struct SessionReport {
  AggregateResult result;
  RoundParams params;  // k and t of the session, once U_1 was known
  std::map<int64_t, PartyCost> clients;
  PartyCost server;
  // Clients that aborted (refused the server), with their reason.
  std::map<int64_t, std::string> aborted;
  // Clients the server excluded, with its reason.
  std::map<int64_t, std::string> excluded;
  // The server's aggregation buffer after each masked input it took, and
  // the masked inputs themselves: what a test checks the server held.
  std::vector<std::vector<Word>> buffer_snapshots;
  std::vector<MaskedInput> masked_inputs;
};

// What one client of a session of `n` clients (ids 0..n-1), each with `k`
// neighbours, none dropping out and `quorum` consistency signatures in the
// unmasking request, sends and receives on the wire: the serialised
// protobuf of each of its messages, built at their sizes (ids near the
// middle of the range; the masked input in chunks of `chunk_words` words of
// word_bits / 8 bytes).
struct ClientTraffic {
  int64_t sent = 0;
  int64_t received = 0;
};
ClientTraffic TrafficOfOneClient(int n, int k, int quorum, size_t length, size_t chunk_words,
                                 int word_bits = 128);

// Runs the session of the clients config.verify_keys invites; those of
// `inputs` (each with its signing key in `signing_keys`) take part, the
// others never answer. Throws fedprof::Error when the round fails (too few
// clients left); the report then is not returned. `keep_snapshots` records
// the buffer and masked inputs (memory: two vectors per client).
SessionReport RunInProcess(const SessionConfig& config, const std::map<int64_t, Bytes>& signing_keys,
                           const std::map<int64_t, std::vector<Word>>& inputs,
                           const Dropouts& dropouts = {}, const Interceptors& interceptors = {},
                           bool keep_snapshots = false);

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_IN_PROCESS_H_
