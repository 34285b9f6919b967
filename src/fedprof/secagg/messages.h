#ifndef FEDPROF_SECAGG_MESSAGES_H_
#define FEDPROF_SECAGG_MESSAGES_H_

// The messages of one secure-aggregation session, in the order of the rounds
// of Bonawitz et al. (CCS 2017), Fig. 4, with one round added after
// AdvertiseKeys, round 0′ (RosterSignature: U_1 signed, the graph's
// randomness revealed); the other rounds keep the paper's numbers. Every field is as the peer sent it: the
// receiving state machine (client.h, server.h) checks it before use, and proto/secagg.proto carries them
// (wire.h).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fedprof/secagg/crypto.h"
#include "fedprof/secagg/graph.h"

namespace fedprof::secagg {

// What a party of a session knows before it starts. Everything but the
// tolerance and the explicit k and t is the same for all and bound into
// the session id; those three are the party's own settings (a client's
// from its own configuration, never from the server), from which it
// computes the parameters it will accept (ParamsFor).
struct SessionConfig {
  Bytes run_id;       // 32 bytes: the server's run
  int64_t round = 0;  // the aggregation round whose models the session sums
  Bytes nonce;        // 32 fresh random bytes of the server's, one session each
  Protocol protocol = Protocol::kSecAggPlus;
  size_t length = 0;  // words of each input vector
  // The words are summed modulo 2^word_bits (whole bytes, 8..128) and travel
  // as word_bits / 8 bytes each: a client's input must fit in them.
  int word_bits = 128;
  // Each invited client's long-term Ed25519 verification key (SIG.ver of
  // Fig. 4), from the deployment's PKI: it authenticates every signed
  // statement. n, the invited count, sets the parameters.
  std::map<int64_t, Bytes> verify_keys;
  // k and t as the server announced them; every party checks that they are
  // its own choice for n invited clients (CheckConfig).
  GraphParams graph;
  // This party's own demands.
  Tolerance tolerance;
  int neighbors = 0;  // an explicit k, 0: chosen from the tolerance
  int threshold = 0;  // an explicit t, 0: chosen from the tolerance
};

// The session id: SHA-256 of everything every party agrees on before the
// session (run, round, nonce, protocol, length, word bits, k, t, each invited client
// and its key). It is bound into every derived key, every AES-GCM
// associated datum and every signature, so a message of one session means
// nothing in another, and the round number is signed.
Bytes SessionId(const SessionConfig& config);

// The parameters of a session of n = |invited| clients under a party's own
// tolerance: k and t (ChooseGraph); the fewest clients U_1 and U_3 may
// hold, n − ⌊δn⌋ (and at least t + 1); and the consistency signatures
// round 4 needs, a majority Q = ⌊(n + c)/2⌋ + 1 of the invited clients
// with c = ⌈γn⌉ corrupt ones among them: two different survivor sets cannot
// both be signed by Q clients, since they would share an honest signer.
struct RoundParams {
  GraphParams graph;
  int corrupt = 0;        // c
  int min_survivors = 0;  // of U_1 and U_3
  int quorum = 0;         // Q
};
RoundParams ParamsFor(Protocol protocol, int n, const Tolerance& tolerance, int neighbors = 0,
                      int threshold = 0);
RoundParams ParamsFor(const SessionConfig& config);
// The session's parameters (ParamsFor); throws fedprof::Error if `config`
// cannot run a session: sizes, keys, and the announced k and t against
// ParamsFor's (what a client refuses).
RoundParams CheckConfig(const SessionConfig& config);

// Round 0 (AdvertiseKeys), client → server: c_u^PK, s_u^PK, a commitment to
// the client's share of the graph's randomness, and their signature.
struct AdvertiseKeys {
  int64_t client = 0;
  Bytes cipher_public;     // c_u^PK: encrypts the shares sent to u
  Bytes mask_public;       // s_u^PK: seeds u's pairwise masks
  Bytes graph_commitment;  // GraphCommitment(session, u, r_u)
  Bytes signature;         // Ed25519 over the session, u, both keys and the commitment
};

// Round 0 → 0′, server → every client: U_1 and each member's commitment,
// the same for all (each client signs what it was shown).
struct Roster {
  std::vector<int64_t> clients;    // U_1, sorted
  std::vector<Bytes> commitments;  // aligned with clients
};

// Round 0′ (RosterSignature), client → server: u's signature on the roster,
// and r_u, now that U_1 and every commitment are fixed.
struct RosterSignature {
  int64_t client = 0;
  Bytes signature;    // over RosterStatement(session, RosterDigest(roster), own keys)
  Bytes graph_nonce;  // r_u
};

// Round 0′ → 1, server → client u: every member's r (the graph's seed is the
// hash of all of them), and the advertised keys and roster signatures of
// u's neighbours in the graph they give.
struct KeyDirectory {
  std::vector<Bytes> graph_nonces;       // aligned with U_1
  std::vector<AdvertiseKeys> peers;      // N(u), sorted by client
  std::vector<Bytes> roster_signatures;  // aligned with peers
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
  std::vector<SealedShares> shares;  // one per neighbour
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

// Round 3 (ConsistencyCheck), client → server: u's signature on U_1 and U_3.
struct ConsistencySignature {
  int64_t client = 0;
  Bytes signature;
};

// Round 3 → 4, server → clients: what the server asks to unmask, with the
// signatures of U_4 on U_3 that prove a majority of the invited clients saw
// the same U_1 and U_3.
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

// The signed statements, commitments and derived keys (domain-separated by
// label and session). The client ids in them are 8 bytes, little-endian.
Bytes AdvertisedStatement(const Bytes& session, const AdvertiseKeys& keys);
Bytes GraphCommitment(const Bytes& session, int64_t client, const Bytes& graph_nonce);
Bytes RosterDigest(const Roster& roster);
// What a client signs in round 0′: U_1 with its commitments, and its own
// advertised keys, so that one signature per neighbour tells a client both
// that the keys are the neighbour's and that it was shown the same U_1.
Bytes RosterStatement(const Bytes& session, const Bytes& roster_digest, const AdvertiseKeys& signer);
// The SecAgg+ graph's seed: the hash of every member's r, which no party
// knew all of when U_1 and the commitments were fixed.
Bytes GraphSeed(const Bytes& session, const Bytes& roster_digest, const std::vector<Bytes>& nonces);
Bytes ConsistencyStatement(const Bytes& session, const Bytes& roster_digest,
                           const std::vector<int64_t>& survivors);
Bytes SelfMaskCommitment(const Bytes& session, int64_t client, const Bytes& self_mask_seed);
Bytes ShareKey(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v);
Bytes ShareAad(const Bytes& session, int64_t from, int64_t to);
Bytes PairwiseSeed(const Bytes& session, const Bytes& agreed, int64_t u, int64_t v);
Bytes EncodeId(int64_t id);
int64_t DecodeId(const Bytes& bytes, size_t at);

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_MESSAGES_H_
