#include "fedprof/secagg/client.h"

#include <algorithm>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/secagg/shamir.h"

namespace fedprof::secagg {
namespace {

const char* PhaseRound(int phase) {
  static const char* const kNames[] = {"AdvertiseKeys",         "RosterSignature",  "ShareKeys",
                                       "MaskedInputCollection", "ConsistencyCheck", "Unmasking",
                                       "done",                  "aborted"};
  return kNames[phase];
}

bool SortedDistinct(const std::vector<int64_t>& ids) {
  return std::adjacent_find(ids.begin(), ids.end(),
                            [](int64_t a, int64_t b) { return a >= b; }) == ids.end();
}

bool Contains(const std::vector<int64_t>& sorted, int64_t id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

}  // namespace

SecAggClient::SecAggClient(SessionConfig config, int64_t id, Bytes signing_key)
    : config_(std::move(config)), id_(id), signing_key_(std::move(signing_key)) {
  params_ = CheckConfig(config_);
  if (config_.verify_keys.count(id_) == 0) {
    throw Error("secagg: client " + std::to_string(id_) + " is not invited to the session");
  }
  if (signing_key_.size() != kKeyBytes) throw Error("secagg: a signing key is 32 bytes");
  session_ = SessionId(config_);
}

void SecAggClient::Expect(Phase phase, const char* round) {
  if (phase_ != phase) {
    throw Error("secagg client " + std::to_string(id_) + ": " + round + " called in round " +
                PhaseRound(static_cast<int>(phase_)));
  }
}

void SecAggClient::Forget() {
  signing_key_.clear();
  mask_keys_ = {};
  cipher_keys_ = {};
  graph_nonce_.clear();
  self_mask_seed_.clear();
  share_keys_.clear();
}

void SecAggClient::Abort(const std::string& why) {
  phase_ = Phase::kAborted;
  Forget();
  throw Error("secagg client " + std::to_string(id_) + " aborts: " + why);
}

AdvertiseKeys SecAggClient::Advertise() {
  Expect(Phase::kAdvertise, "AdvertiseKeys");
  // Fig. 4, Round 0, step 1: two key pairs, and a commitment to this
  // client's share of the graph's randomness, signed with the long-term key.
  cipher_keys_ = GenerateX25519();
  mask_keys_ = GenerateX25519();
  graph_nonce_ = RandomBytes(kKeyBytes);
  AdvertiseKeys out{id_, cipher_keys_.public_key, mask_keys_.public_key,
                    GraphCommitment(session_, id_, graph_nonce_), {}};
  out.signature = Sign(signing_key_, AdvertisedStatement(session_, out));
  advertised_ = out;
  phase_ = Phase::kRoster;
  return out;
}

RosterSignature SecAggClient::SignRoster(const Roster& roster) {
  Expect(Phase::kRoster, "RosterSignature");
  try {
    // Round 0′: U_1 as the server announced it: invited clients only, this
    // one among them with its own commitment, and no fewer than the
    // tolerance lets drop. Once signed, no other U_1 is this client's.
    const std::vector<int64_t>& u1 = roster.clients;
    if (!SortedDistinct(u1) || !Contains(u1, id_)) {
      Abort("U_1 is not a sorted list of distinct clients holding this one");
    }
    for (int64_t v : u1) {
      if (config_.verify_keys.count(v) == 0) Abort("U_1 names client " + std::to_string(v) + ", not invited");
    }
    if (static_cast<int>(u1.size()) < params_.min_survivors) {
      Abort("U_1 of " + std::to_string(u1.size()) + " clients, below the " +
            std::to_string(params_.min_survivors) + " of " + std::to_string(config_.verify_keys.size()) +
            " invited that this client's dropout tolerance allows");
    }
    if (roster.commitments.size() != u1.size()) {
      Abort("a roster of " + std::to_string(u1.size()) + " clients and " +
            std::to_string(roster.commitments.size()) + " commitments");
    }
    const size_t me = static_cast<size_t>(
        std::lower_bound(u1.begin(), u1.end(), id_) - u1.begin());
    if (roster.commitments[me] != advertised_.graph_commitment) {
      Abort("the roster gives this client a graph commitment that is not its own");
    }
    roster_ = roster;
    roster_digest_ = RosterDigest(roster_);
    RosterSignature out{id_, Sign(signing_key_, RosterStatement(session_, roster_digest_, advertised_)),
                        graph_nonce_};
    phase_ = Phase::kShare;
    return out;
  } catch (const Error& e) {
    if (phase_ == Phase::kAborted) throw;
    Abort(e.what());
  }
}

ShareKeys SecAggClient::Share(const KeyDirectory& directory) {
  Expect(Phase::kShare, "ShareKeys");
  try {
    // Round 1, step 1: the graph from every member's r, each the one it
    // committed to before anyone's was known; then the neighbours it gives.
    if (directory.graph_nonces.size() != roster_.clients.size()) {
      Abort(std::to_string(directory.graph_nonces.size()) + " graph nonces for " +
            std::to_string(roster_.clients.size()) + " clients in U_1");
    }
    for (size_t i = 0; i < roster_.clients.size(); ++i) {
      if (GraphCommitment(session_, roster_.clients[i], directory.graph_nonces[i]) !=
          roster_.commitments[i]) {
        Abort("client " + std::to_string(roster_.clients[i]) +
              "'s graph nonce is not the one it committed to");
      }
    }
    const std::vector<int64_t> neighbours =
        NeighboursOf(roster_.clients, params_.graph.neighbors,
                     GraphSeed(session_, roster_digest_, directory.graph_nonces), id_);
    // Step 2: each neighbour's keys, all distinct, signed by their owner
    // together with this same U_1 (a neighbour shown another U_1 would draw
    // another graph).
    if (directory.peers.size() != neighbours.size() ||
        directory.roster_signatures.size() != neighbours.size()) {
      Abort(std::to_string(directory.peers.size()) + " neighbour keys and " +
            std::to_string(directory.roster_signatures.size()) + " roster signatures for " +
            std::to_string(neighbours.size()) + " neighbours");
    }
    std::set<Bytes> keys{cipher_keys_.public_key, mask_keys_.public_key};
    for (size_t i = 0; i < neighbours.size(); ++i) {
      const AdvertiseKeys& peer = directory.peers[i];
      if (peer.client != neighbours[i]) {
        Abort("the keys of client " + std::to_string(peer.client) + " where neighbour " +
              std::to_string(neighbours[i]) + "'s belong");
      }
      if (!Verify(config_.verify_keys.at(peer.client), RosterStatement(session_, roster_digest_, peer),
                  directory.roster_signatures[i])) {
        Abort("neighbour " + std::to_string(peer.client) +
              " did not sign these keys with the U_1 this client signed");
      }
      if (!keys.insert(peer.cipher_public).second || !keys.insert(peer.mask_public).second) {
        Abort("client " + std::to_string(peer.client) + " advertises a key seen before");
      }
      peers_[peer.client] = peer;
    }
    // Steps 3-4: b_u and t-of-k shares of s_u^SK and b_u among the neighbours.
    self_mask_seed_ = RandomBytes(kKeyBytes);
    const int t = params_.graph.threshold;
    const std::vector<secagg::Share> key_shares = ShareSecret(mask_keys_.secret, t, neighbours);
    const std::vector<secagg::Share> mask_shares = ShareSecret(self_mask_seed_, t, neighbours);
    ShareKeys out;
    out.client = id_;
    out.self_mask_commitment = SelfMaskCommitment(session_, id_, self_mask_seed_);
    // Step 5: e_{u,v} = AE.enc(KA.agree(c_u^SK, c_v^PK), u || v || s_{u,v}^SK || b_{u,v}).
    const X25519Agreement cipher(cipher_keys_.secret);
    for (size_t i = 0; i < neighbours.size(); ++i) {
      const int64_t v = neighbours[i];
      // The pair's key encrypts both ways: kept for opening e_{v,u} in round 4.
      const Bytes& key = share_keys_[v] = ShareKey(session_, cipher.With(peers_[v].cipher_public), id_, v);
      const Bytes plaintext = EncodeId(id_) + EncodeId(v) + key_shares[i].value + mask_shares[i].value;
      out.shares.push_back({v, Seal(key, plaintext, ShareAad(session_, id_, v))});
    }
    phase_ = Phase::kMask;
    return out;
  } catch (const Error& e) {
    if (phase_ == Phase::kAborted) throw;
    Abort(e.what());
  }
}

MaskedInput SecAggClient::Mask(const ShareBundle& bundle, const std::vector<Word>& input) {
  Expect(Phase::kMask, "MaskedInputCollection");
  if (input.size() != config_.length) {
    Abort("an input of " + std::to_string(input.size()) + " words, the session expects " +
          std::to_string(config_.length));
  }
  const Word word_mask = WordMask(config_.word_bits);
  for (const Word w : input) {
    if ((w & word_mask) != w) Abort("an input word beyond the session's " + std::to_string(config_.word_bits) + " bits");
  }
  try {
    // Round 2, step 1: U_2 ∩ N(u) is whoever sent this client shares.
    for (const SealedShares& s : bundle.shares) {
      if (peers_.count(s.peer) == 0) Abort("shares from non-neighbour " + std::to_string(s.peer));
      if (s.sealed.size() != SealedSize(kSharePlaintextBytes)) {
        Abort("client " + std::to_string(s.peer) + "'s shares are " +
              std::to_string(s.sealed.size()) + " bytes");
      }
      if (!received_.emplace(s.peer, s.sealed).second) {
        Abort("two sets of shares from client " + std::to_string(s.peer));
      }
    }
    if (static_cast<int>(received_.size()) < params_.graph.threshold) {
      Abort("only " + std::to_string(received_.size()) + " neighbours in U_2, threshold " +
            std::to_string(params_.graph.threshold));
    }
    // Steps 2-4: y_u = x_u + PRG(b_u) + Σ_v Δ_{u,v} PRG(s_{u,v}).
    MaskedInput out{id_, input};
    AddPrg(self_mask_seed_, +1, out.masked);
    const X25519Agreement mask(mask_keys_.secret);
    for (const auto& [v, sealed] : received_) {
      (void)sealed;
      const Bytes agreed = mask.With(peers_[v].mask_public);
      AddPrg(PairwiseSeed(session_, agreed, id_, v), id_ > v ? +1 : -1, out.masked);
    }
    // Modulo 2^word_bits: the masks stay uniform there, and the word fits its bytes.
    for (Word& w : out.masked) w &= word_mask;
    phase_ = Phase::kCheck;
    return out;
  } catch (const Error& e) {
    if (phase_ == Phase::kAborted) throw;
    Abort(e.what());
  }
}

ConsistencySignature SecAggClient::Check(const SurvivorList& list) {
  Expect(Phase::kCheck, "ConsistencyCheck");
  // Round 3, step 1: U_3 ⊆ U_2, holding this client, no smaller than the
  // tolerance lets drop; and enough of this client's neighbours in it that
  // t of them can answer for it, one of them honest, whose pairwise mask
  // then stays on.
  const std::vector<int64_t>& u3 = list.survivors;
  if (!SortedDistinct(u3) || !Contains(u3, id_)) {
    Abort("U_3 is not a sorted list of distinct clients holding this one");
  }
  int neighbours_in = 0;
  for (int64_t v : u3) {
    if (!Contains(roster_.clients, v)) Abort("U_3 names client " + std::to_string(v) + ", not in U_1");
    if (peers_.count(v) != 0) {
      if (received_.count(v) == 0) {
        Abort("U_3 names neighbour " + std::to_string(v) + ", which sent no shares (not in U_2)");
      }
      ++neighbours_in;
    }
  }
  if (static_cast<int>(u3.size()) < params_.min_survivors ||
      neighbours_in < params_.graph.threshold) {
    Abort("U_3 of " + std::to_string(u3.size()) + " clients with " +
          std::to_string(neighbours_in) + " neighbours of this one, below " +
          std::to_string(params_.min_survivors) + " clients or threshold " +
          std::to_string(params_.graph.threshold));
  }
  // Step 2: sign U_3, with the U_1 it came from.
  survivors_ = u3;
  ConsistencySignature out{id_, Sign(signing_key_, ConsistencyStatement(session_, roster_digest_, u3))};
  phase_ = Phase::kUnmask;
  return out;
}

UnmaskResponse SecAggClient::Unmask(const UnmaskRequest& request) {
  Expect(Phase::kUnmask, "Unmasking");
  // Round 4, step 1: the same U_3 this client signed, no client asked for
  // both kinds of share, and the signatures of a majority of the invited
  // clients on U_1 and U_3: then every honest client that reveals was shown
  // this U_3, and none reveals the other kind of share of anyone.
  if (request.survivors != survivors_) Abort("the server's U_3 differs from the one signed");
  if (!SortedDistinct(request.dropped)) Abort("the dropped list is not sorted and distinct");
  for (int64_t v : request.dropped) {
    if (Contains(survivors_, v)) {
      Abort("the server asks for both the self-mask share and the mask-key share of client " +
            std::to_string(v));
    }
    if (!Contains(roster_.clients, v)) Abort("dropped client " + std::to_string(v) + " is not in U_1");
  }
  for (const auto& [v, sealed] : received_) {
    (void)sealed;
    if (!Contains(survivors_, v) &&
        !std::binary_search(request.dropped.begin(), request.dropped.end(), v)) {
      Abort("neighbour " + std::to_string(v) + " is in U_2 but neither survived nor dropped");
    }
  }
  std::set<int64_t> signers;
  const Bytes statement = ConsistencyStatement(session_, roster_digest_, survivors_);
  for (const ConsistencySignature& s : request.signatures) {
    if (static_cast<int>(signers.size()) == params_.quorum) break;  // enough: the rest are not read
    if (!Contains(survivors_, s.client) || !signers.insert(s.client).second) {
      Abort("a consistency signature of client " + std::to_string(s.client) +
            ", not in U_3 or repeated");
    }
    if (!Verify(config_.verify_keys.at(s.client), statement, s.signature)) {
      Abort("client " + std::to_string(s.client) + "'s signature on U_3 does not verify");
    }
  }
  if (static_cast<int>(signers.size()) < params_.quorum) {
    Abort("only " + std::to_string(signers.size()) + " signatures on U_3, " +
          std::to_string(params_.quorum) + " needed (a majority of the " +
          std::to_string(config_.verify_keys.size()) + " invited clients with " +
          std::to_string(params_.corrupt) + " corrupt)");
  }
  // Steps 2-3: open each e_{v,u}, check it names v and u, and reveal one
  // share per neighbour: b_{v,u} if v ∈ U_3, s_{v,u}^SK if v ∈ U_2 \ U_3.
  UnmaskResponse out;
  out.client = id_;
  for (const auto& [v, sealed] : received_) {
    try {
      const Bytes plain = Open(share_keys_.at(v), sealed, ShareAad(session_, v, id_));
      if (plain.size() != kSharePlaintextBytes || DecodeId(plain, 0) != v ||
          DecodeId(plain, 8) != id_) {
        throw Error("its shares name the wrong clients");
      }
      const bool survived = Contains(survivors_, v);
      out.shares.push_back({v, survived ? ShareKind::kSelfMask : ShareKind::kMaskKey,
                            plain.substr(survived ? 16 + kShareBytes : 16, kShareBytes)});
    } catch (const Error& e) {
      LogWarning("secagg client " + std::to_string(id_) + ": the shares of client " +
                 std::to_string(v) + " do not open: " + e.what());
      out.complaints.push_back({v});
    }
  }
  phase_ = Phase::kDone;
  Forget();
  return out;
}

}  // namespace fedprof::secagg
