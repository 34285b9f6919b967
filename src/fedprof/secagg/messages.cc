#include "fedprof/secagg/messages.h"

#include <algorithm>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"

namespace fedprof::secagg {
namespace {

Bytes Labelled(const char* label, const Bytes& session) {
  return std::string(label) + '\0' + session;
}

// The two ids of a pair in a fixed order, so both ends derive one key.
Bytes Pair(int64_t u, int64_t v) { return EncodeId(std::min(u, v)) + EncodeId(std::max(u, v)); }

Bytes Digest(const Bytes& data) {
  const Sha256Digest d = Sha256(data);
  return Bytes(d.begin(), d.end());
}

}  // namespace

Bytes SessionId(const SessionConfig& config) {
  Bytes data = std::string("fedprof secagg session") + '\0' + config.run_id + EncodeId(config.round) +
               config.nonce + static_cast<char>(config.protocol == Protocol::kSecAgg ? 0 : 1) +
               EncodeId(static_cast<int64_t>(config.length)) + EncodeId(config.word_bits) +
               EncodeId(config.graph.neighbors) +
               EncodeId(config.graph.threshold);
  for (const auto& [id, key] : config.verify_keys) data += EncodeId(id) + key;
  return Digest(data);
}

RoundParams ParamsFor(Protocol protocol, int n, const Tolerance& tolerance, int neighbors,
                      int threshold) {
  if (n < tolerance.min_clients) {
    throw Error("secagg: a session of " + std::to_string(n) + " invited clients, fewer than the " +
                std::to_string(tolerance.min_clients) + " this party accepts (secagg.min_clients)");
  }
  RoundParams params;
  params.graph = ChooseGraph(protocol, n, tolerance, neighbors, threshold);
  params.corrupt = CorruptBound(n, tolerance);
  params.min_survivors = std::max(n - DropoutBound(n, tolerance), params.graph.threshold + 1);
  params.quorum = (n + params.corrupt) / 2 + 1;
  if (params.min_survivors > n || params.quorum > params.min_survivors) {
    throw Error("secagg: " + std::to_string(n) + " clients of which " +
                std::to_string(DropoutBound(n, tolerance)) + " may drop out leave fewer than the " +
                std::to_string(std::max(params.min_survivors, params.quorum)) +
                " a round needs (t + 1 survivors, and a majority of consistency signatures)");
  }
  return params;
}

RoundParams ParamsFor(const SessionConfig& config) {
  return ParamsFor(config.protocol, static_cast<int>(config.verify_keys.size()), config.tolerance,
                   config.neighbors, config.threshold);
}

RoundParams CheckConfig(const SessionConfig& config) {
  if (config.run_id.size() != kKeyBytes || config.nonce.size() != kKeyBytes) {
    throw Error("secagg: a run id of " + std::to_string(config.run_id.size()) + " bytes and a nonce of " +
                std::to_string(config.nonce.size()) + ", expected 32 each");
  }
  if (config.round < 0) throw Error("secagg: round " + std::to_string(config.round));
  if (config.length == 0 || config.length > (size_t{1} << 28)) {
    throw Error("secagg: input vectors of " + std::to_string(config.length) +
                " words, expected 1..2^28");
  }
  if (config.word_bits < 8 || config.word_bits > 128 || config.word_bits % 8 != 0) {
    throw Error("secagg: words of " + std::to_string(config.word_bits) + " bits, expected whole bytes, 8..128");
  }
  if (config.verify_keys.size() < 2) {
    throw Error("secagg: a session needs the verification keys of at least 2 clients");
  }
  for (const auto& [id, key] : config.verify_keys) {
    if (id < 0 || key.size() != kKeyBytes) {
      throw Error("secagg: verification key of client " + std::to_string(id) +
                  " is not 32 bytes for an id >= 0");
    }
  }
  if (config.neighbors < 0 || config.threshold < 0) {
    throw Error("secagg: negative neighbour count or threshold");
  }
  const RoundParams own = ParamsFor(config);
  if (config.graph != own.graph) {
    throw Error("secagg: the session's k = " + std::to_string(config.graph.neighbors) +
                ", t = " + std::to_string(config.graph.threshold) + " are not this party's k = " +
                std::to_string(own.graph.neighbors) + ", t = " + std::to_string(own.graph.threshold) +
                " for " + std::to_string(config.verify_keys.size()) +
                " clients (secagg.dropout, secagg.corrupt, secagg.security_bits, "
                "secagg.correctness_bits, secagg.neighbors, secagg.threshold)");
  }
  return own;
}

Bytes EncodeId(int64_t id) {
  Bytes out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((static_cast<uint64_t>(id) >> (8 * i)) & 0xff);
  return out;
}

int64_t DecodeId(const Bytes& bytes, size_t at) {
  if (at + 8 > bytes.size()) throw Error("secagg: a client id past the end of its message");
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return static_cast<int64_t>(v);
}

Bytes AdvertisedStatement(const Bytes& session, const AdvertiseKeys& keys) {
  return Labelled("fedprof secagg AdvertiseKeys", session) + EncodeId(keys.client) +
         keys.cipher_public + keys.mask_public + keys.graph_commitment;
}

Bytes GraphCommitment(const Bytes& session, int64_t client, const Bytes& graph_nonce) {
  return Digest(Labelled("fedprof secagg graph commitment", session) + EncodeId(client) + graph_nonce);
}

Bytes RosterDigest(const Roster& roster) {
  if (roster.commitments.size() != roster.clients.size()) {
    throw Error("secagg: a roster of " + std::to_string(roster.clients.size()) + " clients and " +
                std::to_string(roster.commitments.size()) + " commitments");
  }
  Bytes data = "fedprof secagg roster";
  for (size_t i = 0; i < roster.clients.size(); ++i) {
    if (roster.commitments[i].size() != kCommitmentBytes) throw Error("secagg: a commitment is 32 bytes");
    data += EncodeId(roster.clients[i]) + roster.commitments[i];
  }
  return Digest(data);
}

Bytes RosterStatement(const Bytes& session, const Bytes& roster_digest, const AdvertiseKeys& signer) {
  return Labelled("fedprof secagg RosterSignature", session) + roster_digest + EncodeId(signer.client) +
         signer.cipher_public + signer.mask_public;
}

Bytes GraphSeed(const Bytes& session, const Bytes& roster_digest, const std::vector<Bytes>& nonces) {
  Bytes data = Labelled("fedprof secagg graph seed", session) + roster_digest;
  for (const Bytes& r : nonces) data += r;
  return Digest(data);
}

Bytes ConsistencyStatement(const Bytes& session, const Bytes& roster_digest,
                           const std::vector<int64_t>& survivors) {
  Bytes out = Labelled("fedprof secagg ConsistencyCheck", session) + roster_digest;
  for (int64_t id : survivors) out += EncodeId(id);
  return out;
}

Bytes SelfMaskCommitment(const Bytes& session, int64_t client, const Bytes& self_mask_seed) {
  return Digest(Labelled("fedprof secagg self-mask commitment", session) + EncodeId(client) +
                self_mask_seed);
}

Bytes ShareKey(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v) {
  return Hkdf(agreed, Labelled("fedprof secagg share key", session) + Pair(u, v));
}

Bytes ShareAad(const Bytes& session, int64_t from, int64_t to) {
  return Labelled("fedprof secagg shares", session) + EncodeId(from) + EncodeId(to);
}

Bytes PairwiseSeed(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v) {
  return Hkdf(agreed, Labelled("fedprof secagg pairwise mask", session) + Pair(u, v));
}

}  // namespace fedprof::secagg
