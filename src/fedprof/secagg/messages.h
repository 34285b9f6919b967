#ifndef FEDPROF_SECAGG_MESSAGES_H_
#define FEDPROF_SECAGG_MESSAGES_H_

// The messages of one secure-aggregation session, in the order of the rounds
// of Bonawitz et al. (CCS 2017), Fig. 4. Every field is as the peer sent it:
// the receiving state machine (client.h, server.h) checks it before use, and
// proto/secagg.proto carries them (wire.h).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fedprof/secagg/crypto.h"
#include "fedprof/secagg/graph.h"

namespace fedprof::secagg {

// What every party of a session knows before it starts, the same for all.
struct SessionConfig {
  Bytes session_id;  // 32 fresh random bytes per round: binds every key, share and signature
  Protocol protocol = Protocol::kSecAggPlus;
  Tolerance tolerance;
  int neighbors = 0;  // k, 0: chosen from the tolerance (ChooseGraph)
  int threshold = 0;  // t, 0: chosen from the tolerance
  size_t length = 0;  // words of each input vector
  // Each client's long-term Ed25519 verification key (SIG.ver of Fig. 4),
  // from the deployment's PKI: it authenticates AdvertiseKeys and the
  // consistency check.
  std::map<int64_t, Bytes> verify_keys;
};
// Throws fedprof::Error if `config` cannot run a session.
void CheckConfig(const SessionConfig& config);

// Round 0 (AdvertiseKeys), client → server: c_u^PK, s_u^PK and their signature.
struct AdvertiseKeys {
  int64_t client = 0;
  Bytes cipher_public;  // c_u^PK: encrypts the shares sent to u
  Bytes mask_public;    // s_u^PK: seeds u's pairwise masks
  Bytes signature;      // Ed25519 over the session, u and both keys
};

// Round 0 → 1, server → client u: U_1 and the advertised keys of u's
// neighbours in it.
struct KeyDirectory {
  std::vector<int64_t> clients;      // U_1, sorted
  std::vector<AdvertiseKeys> peers;  // N(u) ∩ U_1, sorted by client
};

// One encrypted share pair e_{u,v}: `peer` is the recipient v in ShareKeys
// and the sender u in a ShareBundle.
struct SealedShares {
  int64_t peer = 0;
  Bytes sealed;  // AES-GCM of u || v || s_{u,v}^SK || b_{u,v}
};

// Round 1 (ShareKeys), client → server.
struct ShareKeys {
  int64_t client = 0;
  Bytes self_mask_commitment;         // SHA-256 binding b_u, checked on reconstruction
  std::vector<SealedShares> shares;  // one per neighbour in U_1
};

// Round 1 → 2, server → client v: the e_{u,v} of the neighbours u in U_2.
struct ShareBundle {
  std::vector<SealedShares> shares;
};

// Round 2 (MaskedInputCollection), client → server: y_u.
struct MaskedInput {
  int64_t client = 0;
  std::vector<Word> masked;
};

// Round 2 → 3, server → clients: U_3, the clients whose masked input counts.
struct SurvivorList {
  std::vector<int64_t> survivors;  // sorted
};

// Round 3 (ConsistencyCheck), client → server: u's signature on U_3.
struct ConsistencySignature {
  int64_t client = 0;
  Bytes signature;
};

// Round 3 → 4, server → clients: what the server asks to unmask, with the
// signatures of U_4 on U_3 that prove every client saw the same U_3.
struct UnmaskRequest {
  std::vector<int64_t> survivors;  // U_3: self-mask shares b wanted
  std::vector<int64_t> dropped;    // U_2 \ U_3: mask-key shares s^SK wanted
  std::vector<ConsistencySignature> signatures;
};

enum class ShareKind { kSelfMask = 0, kMaskKey = 1 };

struct RevealedShare {
  int64_t owner = 0;  // whose secret this is a share of
  ShareKind kind = ShareKind::kSelfMask;
  Bytes value;  // kShareBytes
};

// The owner of shares this client could not open (authentication failed
// or they named the wrong clients). No free text travels: the server logs
// only ids it has checked.
struct Complaint {
  int64_t owner = 0;
};

// Round 4 (Unmasking), client → server.
struct UnmaskResponse {
  int64_t client = 0;
  std::vector<RevealedShare> shares;
  std::vector<Complaint> complaints;
};

// What the server learns at the end: Σ_{u ∈ U_3} x_u mod 2^128 and U_3.
struct AggregateResult {
  std::vector<Word> sum;
  std::vector<int64_t> survivors;
};

// Sizes and labels shared by both state machines.
constexpr size_t kCommitmentBytes = 32;
constexpr size_t kSharePlaintextBytes = 8 + 8 + 33 + 33;  // u, v, s_{u,v}^SK, b_{u,v}

// The signed statements and derived keys (domain-separated by label and
// session). The client ids in them are 8 bytes, little-endian.
Bytes AdvertisedStatement(const Bytes& session, int64_t client, const Bytes& cipher_public,
                          const Bytes& mask_public);
Bytes ConsistencyStatement(const Bytes& session, const std::vector<int64_t>& survivors);
Bytes SelfMaskCommitment(const Bytes& session, int64_t client, const Bytes& self_mask_seed);
Bytes ShareKey(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v);
Bytes ShareAad(const Bytes& session, int64_t from, int64_t to);
Bytes PairwiseSeed(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v);
Bytes EncodeId(int64_t id);
int64_t DecodeId(const Bytes& bytes, size_t at);

// The parameters of a session of n = |U_1| clients: k, t, and the fewest
// survivors whose sum the server may learn: t + 1 (a survivor's self mask
// needs t answering neighbours besides itself); for SecAgg+ also n − ⌊δn⌋,
// since its t bounds a neighbourhood, not the round.
struct RoundParams {
  GraphParams graph;
  int min_survivors = 0;
};
RoundParams ParamsFor(const SessionConfig& config, int n);

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_MESSAGES_H_
