#include "fedprof/secagg/messages.h"

#include <algorithm>
#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"

namespace fedprof::secagg {
namespace {

Bytes Labelled(const char* label, const Bytes& session) {
  return std::string(label) + '\0' + session;
}

// The two ids of a pair in a fixed order, so both ends derive one key.
Bytes Pair(int64_t u, int64_t v) { return EncodeId(std::min(u, v)) + EncodeId(std::max(u, v)); }

}  // namespace

void CheckConfig(const SessionConfig& config) {
  if (config.session_id.size() != kKeyBytes) {
    throw Error("secagg: a session id of " + std::to_string(config.session_id.size()) +
                " bytes, expected 32");
  }
  if (config.length == 0 || config.length > (size_t{1} << 28)) {
    throw Error("secagg: input vectors of " + std::to_string(config.length) +
                " words, expected 1..2^28");
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
}

RoundParams ParamsFor(const SessionConfig& config, int n) {
  RoundParams params;
  params.graph =
      ChooseGraph(config.protocol, n, config.tolerance, config.neighbors, config.threshold);
  // A survivor's self mask needs t answering neighbours besides itself.
  params.min_survivors = params.graph.threshold + 1;
  if (config.protocol == Protocol::kSecAggPlus) {
    const int dropped = static_cast<int>(std::floor(config.tolerance.dropout * n));
    params.min_survivors = std::max(params.min_survivors, n - dropped);
  }
  return params;
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

Bytes AdvertisedStatement(const Bytes& session, int64_t client, const Bytes& cipher_public,
                          const Bytes& mask_public) {
  return Labelled("fedprof secagg AdvertiseKeys", session) + EncodeId(client) + cipher_public +
         mask_public;
}

Bytes ConsistencyStatement(const Bytes& session, const std::vector<int64_t>& survivors) {
  Bytes out = Labelled("fedprof secagg ConsistencyCheck", session);
  for (int64_t id : survivors) out += EncodeId(id);
  return out;
}

Bytes SelfMaskCommitment(const Bytes& session, int64_t client, const Bytes& self_mask_seed) {
  const Sha256Digest d =
      Sha256(Labelled("fedprof secagg self-mask commitment", session) + EncodeId(client) +
             self_mask_seed);
  return Bytes(d.begin(), d.end());
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
