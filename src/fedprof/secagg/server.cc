#include "fedprof/secagg/server.h"

#include <algorithm>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"

namespace fedprof::secagg {
namespace {

const char* const kKindNames[] = {"self mask", "mask key"};

std::vector<int64_t> Ids(const std::set<int64_t>& ids) { return {ids.begin(), ids.end()}; }

}  // namespace

SecAggServer::SecAggServer(SessionConfig config) : config_(std::move(config)) {
  params_ = CheckConfig(config_);
  for (const auto& entry : config_.verify_keys) invited_.insert(entry.first);
  session_ = SessionId(config_);
  probe_key_ = GenerateX25519().secret;
}

void SecAggServer::Expect(Phase phase, const char* what) {
  if (phase_ != phase) throw Error(std::string("secagg server: ") + what + " out of order");
}

void SecAggServer::Fail(const std::string& why) {
  phase_ = Phase::kDone;
  total_.clear();
  throw Error("secagg: the round fails: " + why);
}

bool SecAggServer::Exclude(int64_t client, const std::string& why) {
  if (excluded_.emplace(client, why).second) {
    LogWarning("secagg: client " + std::to_string(client) + " excluded: " + why);
  }
  return false;
}

void SecAggServer::Refuse(int64_t client, const std::string& why) {
  if (invited_.count(client) != 0) Exclude(client, why);
}

// Whether a message of `round` from `sender` may be taken now: its round is
// open, and its sender is eligible (in the set the round is of) and not yet
// heard from (`received`). A message that is not is left for the transport
// to refuse (it logs why); a second message of a round excludes its sender.
bool SecAggServer::Accepting(Phase phase, int64_t sender, bool eligible, bool received, const char* round) {
  if (phase_ != phase || excluded_.count(sender) != 0 || !eligible) return false;
  if (received) return Exclude(sender, std::string("two ") + round + " messages");
  return true;
}

bool SecAggServer::ReceiveAdvertise(int64_t sender, const AdvertiseKeys& m) {
  if (!Accepting(Phase::kAdvertise, sender, invited_.count(sender) != 0, advertised_.count(sender) != 0,
                 "AdvertiseKeys")) {
    return false;
  }
  if (m.client != sender) return Exclude(sender, "AdvertiseKeys for another client");
  if (m.cipher_public.size() != kKeyBytes || m.mask_public.size() != kKeyBytes ||
      m.cipher_public == m.mask_public || m.graph_commitment.size() != kCommitmentBytes) {
    return Exclude(sender, "AdvertiseKeys with keys not of 32 bytes, twice the same key, or no "
                           "graph commitment");
  }
  if (!Verify(config_.verify_keys.at(sender), AdvertisedStatement(session_, m), m.signature)) {
    return Exclude(sender, "AdvertiseKeys whose signature does not verify");
  }
  // A key of small order would make every agreement with it degenerate.
  try {
    X25519Agree(probe_key_, m.cipher_public);
    X25519Agree(probe_key_, m.mask_public);
  } catch (const Error&) {
    return Exclude(sender, "a degenerate X25519 public key");
  }
  advertised_[sender] = m;
  return true;
}

Roster SecAggServer::CloseAdvertise() {
  Expect(Phase::kAdvertise, "CloseAdvertise");
  // Fig. 4, Round 0, server: U_1, no smaller than the clients' tolerance
  // allows (each of them checks it too).
  const int n = static_cast<int>(advertised_.size());
  if (n < params_.min_survivors) {
    Fail(std::to_string(n) + " clients advertised keys, fewer than the " +
         std::to_string(params_.min_survivors) + " the session needs");
  }
  for (const auto& [id, keys] : advertised_) {
    roster_.clients.push_back(id);
    roster_.commitments.push_back(keys.graph_commitment);
  }
  roster_digest_ = RosterDigest(roster_);
  phase_ = Phase::kRoster;
  return roster_;
}

bool SecAggServer::ReceiveRosterSignature(int64_t sender, const RosterSignature& m) {
  // U_1 is who advertised.
  if (!Accepting(Phase::kRoster, sender, advertised_.count(sender) != 0, roster_signatures_.count(sender) != 0,
                 "RosterSignature")) {
    return false;
  }
  if (m.client != sender) return Exclude(sender, "a roster signature for another client");
  if (m.graph_nonce.size() != kKeyBytes ||
      GraphCommitment(session_, sender, m.graph_nonce) != advertised_.at(sender).graph_commitment) {
    return Exclude(sender, "a graph nonce that is not the one it committed to");
  }
  if (!Verify(config_.verify_keys.at(sender),
              RosterStatement(session_, roster_digest_, advertised_.at(sender)), m.signature)) {
    return Exclude(sender, "a signature on U_1 that does not verify");
  }
  roster_signatures_[sender] = m;
  return true;
}

std::map<int64_t, KeyDirectory> SecAggServer::CloseRoster() {
  Expect(Phase::kRoster, "CloseRoster");
  // Round 0′, server: every member's nonce, or no graph.
  std::vector<Bytes> nonces;
  for (int64_t u : roster_.clients) {
    const auto it = roster_signatures_.find(u);
    if (it == roster_signatures_.end()) {
      const auto out = excluded_.find(u);
      Fail("client " + std::to_string(u) + " of U_1 did not reveal its graph nonce" +
           (out != excluded_.end() ? " (" + out->second + ")" : std::string()) +
           ", without which the graph cannot be drawn");
    }
    nonces.push_back(it->second.graph_nonce);
  }
  graph_ = Neighbours(roster_.clients, params_.graph.neighbors,
                      GraphSeed(session_, roster_digest_, nonces));
  std::map<int64_t, KeyDirectory> out;
  for (int64_t u : roster_.clients) {
    KeyDirectory& d = out[u];
    d.graph_nonces = nonces;
    for (int64_t v : graph_[u]) {
      d.peers.push_back(advertised_[v]);
      d.roster_signatures.push_back(roster_signatures_[v].signature);
    }
  }
  phase_ = Phase::kShare;
  return out;
}

bool SecAggServer::ReceiveShares(int64_t sender, const ShareKeys& m) {
  if (!Accepting(Phase::kShare, sender, advertised_.count(sender) != 0, shares_.count(sender) != 0,
                 "ShareKeys")) {
    return false;
  }
  if (m.client != sender) return Exclude(sender, "ShareKeys for another client");
  if (m.self_mask_commitment.size() != kCommitmentBytes) {
    return Exclude(sender, "a self-mask commitment of " +
                               std::to_string(m.self_mask_commitment.size()) + " bytes");
  }
  // One ciphertext of the exact size for each neighbour, in order.
  const std::vector<int64_t>& neighbours = graph_[sender];
  if (m.shares.size() != neighbours.size()) {
    return Exclude(sender, std::to_string(m.shares.size()) + " encrypted shares for " +
                               std::to_string(neighbours.size()) + " neighbours");
  }
  for (size_t i = 0; i < neighbours.size(); ++i) {
    if (m.shares[i].peer != neighbours[i] ||
        m.shares[i].sealed.size() != SealedSize(kSharePlaintextBytes)) {
      return Exclude(sender, "encrypted shares not addressed to its neighbours in order, or of "
                             "the wrong size");
    }
  }
  shares_[sender] = m;
  return true;
}

std::map<int64_t, ShareBundle> SecAggServer::CloseShares() {
  Expect(Phase::kShare, "CloseShares");
  // Round 1, server: U_2, and to each v ∈ U_2 the e_{u,v} of u ∈ U_2 ∩ N(v).
  if (static_cast<int>(shares_.size()) < params_.min_survivors) {
    Fail(std::to_string(shares_.size()) + " clients shared keys, fewer than the " +
         std::to_string(params_.min_survivors) + " the sum needs");
  }
  std::map<int64_t, ShareBundle> out;
  for (const auto& [u, message] : shares_) {
    out[u];
    for (const SealedShares& s : message.shares) {
      if (shares_.count(s.peer) != 0) out[s.peer].shares.push_back({u, s.sealed});
    }
  }
  total_.assign(config_.length, 0);
  phase_ = Phase::kMask;
  return out;
}

bool SecAggServer::ReceiveMasked(int64_t sender, const MaskedInput& m) {
  if (!Accepting(Phase::kMask, sender, shares_.count(sender) != 0, masked_.count(sender) != 0,
                 "MaskedInputCollection")) {
    return false;
  }
  if (m.client != sender) return Exclude(sender, "a masked input for another client");
  if (m.masked.size() != config_.length) {
    return Exclude(sender, "a masked input of " + std::to_string(m.masked.size()) +
                               " words, the session's are " + std::to_string(config_.length));
  }
  // Round 2, server: y_u joins the total and is not kept.
  for (size_t i = 0; i < total_.size(); ++i) total_[i] += m.masked[i];
  masked_.insert(sender);
  return true;
}

SurvivorList SecAggServer::CloseMasked() {
  Expect(Phase::kMask, "CloseMasked");
  if (static_cast<int>(masked_.size()) < params_.min_survivors) {
    Fail(std::to_string(masked_.size()) + " masked inputs, fewer than the " +
         std::to_string(params_.min_survivors) + " the sum needs");
  }
  survivors_ = Ids(masked_);
  phase_ = Phase::kCheck;
  return {survivors_};
}

bool SecAggServer::ReceiveSignature(int64_t sender, const ConsistencySignature& m) {
  if (!Accepting(Phase::kCheck, sender, masked_.count(sender) != 0, signatures_.count(sender) != 0,
                 "ConsistencyCheck")) {
    return false;
  }
  if (m.client != sender ||
      !Verify(config_.verify_keys.at(sender), ConsistencyStatement(session_, roster_digest_, survivors_),
              m.signature)) {
    return Exclude(sender, "a signature on U_3 that does not verify");
  }
  signatures_[sender] = m;
  return true;
}

UnmaskRequest SecAggServer::CloseConsistency() {
  Expect(Phase::kCheck, "CloseConsistency");
  // Round 3, server: signatures of a majority of the invited clients (U_4),
  // without which no honest client reveals anything.
  if (static_cast<int>(signatures_.size()) < params_.quorum) {
    Fail(std::to_string(signatures_.size()) + " consistency signatures, " +
         std::to_string(params_.quorum) + " needed");
  }
  UnmaskRequest out;
  out.survivors = survivors_;
  for (const auto& entry : shares_) {
    if (masked_.count(entry.first) == 0) out.dropped.push_back(entry.first);
  }
  // The quorum is what every client checks; more would only cost them.
  for (const auto& entry : signatures_) {
    if (static_cast<int>(out.signatures.size()) == params_.quorum) break;
    out.signatures.push_back(entry.second);
  }
  phase_ = Phase::kUnmask;
  return out;
}

std::vector<int64_t> SecAggServer::signers() const {
  std::vector<int64_t> ids;
  for (const auto& entry : signatures_) ids.push_back(entry.first);
  return ids;
}

bool SecAggServer::ReceiveUnmask(int64_t sender, const UnmaskResponse& m) {
  if (!Accepting(Phase::kUnmask, sender, signatures_.count(sender) != 0, answered_.count(sender) != 0,
                 "Unmasking")) {
    return false;
  }
  if (m.client != sender) return Exclude(sender, "an unmasking answer for another client");
  // Exactly one share or one complaint per neighbour in U_2, of the kind
  // that neighbour's fate calls for.
  std::set<int64_t> owners;
  const std::vector<int64_t>& neighbours = graph_[sender];
  auto expected = [&](int64_t owner) {
    return std::binary_search(neighbours.begin(), neighbours.end(), owner) &&
           shares_.count(owner) != 0 && owners.insert(owner).second;
  };
  for (const RevealedShare& s : m.shares) {
    if (!expected(s.owner)) {
      return Exclude(sender, "a share of client " + std::to_string(s.owner) +
                                 ", not a neighbour in U_2 or repeated");
    }
    const ShareKind wanted =
        masked_.count(s.owner) != 0 ? ShareKind::kSelfMask : ShareKind::kMaskKey;
    if (s.kind != wanted || s.value.size() != kShareBytes) {
      return Exclude(sender, "a share of client " + std::to_string(s.owner) +
                                 " of the wrong kind or size");
    }
  }
  for (const Complaint& c : m.complaints) {
    if (!expected(c.owner)) {
      return Exclude(sender, "a complaint about client " + std::to_string(c.owner) +
                                 ", not a neighbour in U_2 or repeated");
    }
  }
  for (const Complaint& c : m.complaints) {
    LogWarning("secagg: client " + std::to_string(sender) + " could not open the shares of client " +
               std::to_string(c.owner));
  }
  for (const RevealedShare& s : m.shares) {
    revealed_[{s.owner, static_cast<int>(s.kind)}].push_back({sender, s.value});
  }
  answered_.insert(sender);
  return true;
}

template <typename Check>
Bytes SecAggServer::Recover(int64_t owner, ShareKind kind, Check verified) {
  const int t = params_.graph.threshold;
  std::vector<Share> candidates;
  for (const Share& s : revealed_[{owner, static_cast<int>(kind)}]) {
    if (excluded_.count(s.holder) == 0) candidates.push_back(s);
  }
  const std::string what = std::string("client ") + std::to_string(owner) + "'s " +
                           kKindNames[static_cast<int>(kind)];
  if (static_cast<int>(candidates.size()) < t) {
    Fail("only " + std::to_string(candidates.size()) + " shares of " + what + ", threshold " +
         std::to_string(t));
  }
  auto attempt = [&](const std::vector<Share>& basis, Bytes& secret) {
    try {
      secret = reconstructor_.Reconstruct(basis, t);
      return verified(secret);
    } catch (const Error&) {
      return false;  // not a field element, or not a 256-bit secret
    }
  };
  Bytes secret;
  std::vector<Share> basis(candidates.begin(), candidates.begin() + t);
  if (attempt(basis, secret)) return secret;
  // A wrong share among the first t: leave each out in turn, using the next
  // share instead, and exclude the holder whose absence gives the committed
  // secret. More than one wrong share fails the round.
  if (static_cast<int>(candidates.size()) > t) {
    for (int out = 0; out < t; ++out) {
      std::vector<Share> trial;
      for (int i = 0; i <= t; ++i) {
        if (i != out) trial.push_back(candidates[i]);
      }
      if (attempt(trial, secret)) {
        Exclude(candidates[out].holder, "a share of " + what + " that is not on its polynomial");
        return secret;
      }
    }
  }
  Fail("the shares of " + what + " do not reconstruct the committed secret");
}

AggregateResult SecAggServer::Finish() {
  Expect(Phase::kUnmask, "Finish");
  // Round 4, server: at least t answers (U_5).
  if (static_cast<int>(answered_.size()) < params_.graph.threshold) {
    Fail(std::to_string(answered_.size()) + " unmasking answers, threshold " +
         std::to_string(params_.graph.threshold));
  }
  // Σ_{u ∈ U_3} x_u = Σ y_u − Σ_{u ∈ U_3} PRG(b_u)
  //                   − Σ_{u ∈ U_3, v ∈ N(u) ∩ (U_2 \ U_3)} Δ_{u,v} PRG(s_{u,v}).
  for (int64_t u : survivors_) {
    const Bytes seed = Recover(u, ShareKind::kSelfMask, [&](const Bytes& b) {
      return SelfMaskCommitment(session_, u, b) == shares_[u].self_mask_commitment;
    });
    AddPrg(seed, -1, total_);
  }
  for (const auto& entry : shares_) {
    const int64_t v = entry.first;
    if (masked_.count(v) != 0) continue;
    const Bytes secret = Recover(v, ShareKind::kMaskKey, [&](const Bytes& s) {
      return X25519PublicOf(s) == advertised_[v].mask_public;
    });
    const X25519Agreement dropped(secret);
    for (int64_t u : graph_[v]) {
      if (masked_.count(u) == 0) continue;
      const Bytes agreed = dropped.With(advertised_[u].mask_public);
      AddPrg(PairwiseSeed(session_, agreed, u, v), u > v ? -1 : +1, total_);
    }
  }
  phase_ = Phase::kDone;
  const Word mask = WordMask(config_.word_bits);
  for (Word& w : total_) w &= mask;
  AggregateResult result{std::move(total_), survivors_};
  total_.clear();
  return result;
}

}  // namespace fedprof::secagg
