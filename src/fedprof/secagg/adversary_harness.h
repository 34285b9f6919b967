#ifndef FEDPROF_SECAGG_ADVERSARY_HARNESS_H_
#define FEDPROF_SECAGG_ADVERSARY_HARNESS_H_

// The malicious-server harness: a server that deviates from the protocol as
// it likes, together with the clients it controls, against honest clients
// that are the real state machines (client.h), every message carried
// through its wire bytes. After each attack, everything the adversary holds
// (the masked inputs, the shares its clients decrypted, the shares honest
// clients revealed, every secret of its own clients) is searched for each
// honest client's input: the search reconstructs every secret it can and
// removes every mask it knows. The attacks are those a server with a few
// corrupt clients can mount against SecAgg and SecAgg+: survivor sets that
// differ between clients (split views), a U_1 too small or different for
// one client, parameters of the server's choosing, a replayed session, a
// ground graph; each must fail with the honest clients refusing in one line.
// The attacks themselves are in adversary_test.cc (the detector, split
// views, small cohorts) and adversary_refusals_test.cc (what honest clients
// refuse before they reveal anything).

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "fedprof/core/error.h"
#include "fedprof/secagg/client.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/secagg/shamir.h"
#include "fedprof/secagg/wire.h"
#include "tests/expect_error.h"

namespace fedprof::secagg {
namespace adversary {

using testing_support::ExpectError;

// A message as its receiver gets it: encoded, serialised, parsed, decoded
// and checked.
template <typename Message>
inline Message OverTheWire(const Message& message) {
  std::string bytes;
  if (!ToWire(message).SerializeToString(&bytes)) throw Error("cannot encode");
  decltype(ToWire(message)) parsed;
  if (!parsed.ParseFromString(bytes)) throw Error("cannot parse");
  return FromWire(parsed, "the server");
}

inline MaskedInput OverTheWire(const MaskedInput& message) {
  MaskedInputAssembler assembler(message.masked.size(), "client " + std::to_string(message.client));
  for (const pb::MaskedInputChunk& chunk : ToWire(message, 3)) {
    std::string bytes;
    chunk.SerializeToString(&bytes);
    pb::MaskedInputChunk parsed;
    if (!parsed.ParseFromString(bytes)) throw Error("cannot parse");
    assembler.Add(parsed);
  }
  return assembler.Finish();
}

// A client of the server's: every secret of it is the adversary's.
struct Colluder {
  Bytes signing_key;
  KeyPair cipher, mask;
  Bytes graph_nonce, self_mask_seed;
  AdvertiseKeys advertised;
};

// One session: n invited clients 0 .. n−1, of which `corrupt` (drawn at
// random) collude with the server; the honest clients run the default
// tolerance (or `honest`), and the session's k and t are theirs.
class Attack {
 public:
  Attack(Protocol protocol, int n, int corrupt, uint32_t seed, Tolerance honest = {}) : rng_(seed) {
    config_.run_id = RandomBytes(kKeyBytes);
    config_.round = 7;
    config_.nonce = RandomBytes(kKeyBytes);
    config_.protocol = protocol;
    config_.length = 4;
    config_.tolerance = honest;
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng_);
    std::map<int64_t, Bytes> signing;
    for (int64_t id = 0; id < n; ++id) {
      const KeyPair key = GenerateEd25519();
      config_.verify_keys[id] = key.public_key;
      signing[id] = key.secret;
    }
    config_.graph = ParamsFor(config_).graph;
    session_ = SessionId(config_);
    params_ = ParamsFor(config_);
    signing_ = signing;
    for (int i = 0; i < n; ++i) {
      const int64_t id = ids[static_cast<size_t>(i)];
      if (i < corrupt) {
        colluders_[id].signing_key = signing[id];
      } else {
        honest_.emplace(id, SecAggClient(config_, id, signing[id]));
        std::vector<Word>& x = inputs_[id];
        for (size_t w = 0; w < config_.length; ++w) x.push_back((Word{rng_()} << 64) | rng_());
      }
    }
  }

  const SessionConfig& config() const { return config_; }
  const RoundParams& params() const { return params_; }
  const std::map<int64_t, std::string>& refused() const { return refused_; }
  bool Honest(int64_t id) const { return honest_.count(id) != 0; }
  std::vector<int64_t> HonestIds() const {
    std::vector<int64_t> ids;
    for (const auto& entry : honest_) ids.push_back(entry.first);
    return ids;
  }
  std::vector<int64_t> All() const {
    std::vector<int64_t> ids;
    for (const auto& entry : config_.verify_keys) ids.push_back(entry.first);
    return ids;
  }

  // Honest `id` asked into the same session (the same config, so the same
  // session id) again, as a fresh client that never joined it.
  void Rejoin(int64_t id) {
    honest_.erase(id);
    honest_.emplace(id, SecAggClient(config_, id, signing_.at(id)));
    refused_.erase(id);
  }

  // --- The honest clients' steps, each message through the wire. A client
  // that refuses is recorded with its reason and takes no further part.

  template <typename Step>
  auto Ask(int64_t id, Step step) -> std::optional<decltype(step(std::declval<SecAggClient&>()))> {
    if (refused_.count(id) != 0) return std::nullopt;
    try {
      return step(honest_.at(id));
    } catch (const Error& e) {
      refused_[id] = e.what();
      return std::nullopt;
    }
  }

  // Round 0: every client's keys; the colluders' made by the adversary.
  void Advertise() {
    for (auto& [id, c] : colluders_) {
      c.cipher = GenerateX25519();
      c.mask = GenerateX25519();
      c.graph_nonce = RandomBytes(kKeyBytes);
      c.self_mask_seed = RandomBytes(kKeyBytes);
      c.advertised = {
          id, c.cipher.public_key, c.mask.public_key, GraphCommitment(session_, id, c.graph_nonce), {}};
      c.advertised.signature = Sign(c.signing_key, AdvertisedStatement(session_, c.advertised));
      advertised_[id] = c.advertised;
    }
    for (const int64_t id : HonestIds()) {
      if (auto m = Ask(id, [](SecAggClient& c) { return c.Advertise(); })) advertised_[id] = OverTheWire(*m);
    }
  }

  // The roster of `clients` with their advertised commitments.
  Roster RosterOf(std::vector<int64_t> clients) const {
    std::sort(clients.begin(), clients.end());
    Roster r;
    for (int64_t id : clients) {
      r.clients.push_back(id);
      r.commitments.push_back(advertised_.at(id).graph_commitment);
    }
    return r;
  }

  // Round 0′: `roster` shown to honest client `id`; its signature (of this
  // roster) and nonce are kept. Colluders sign whatever roster is asked.
  void ShowRoster(int64_t id, const Roster& roster) {
    const Roster carried = OverTheWire(roster);
    if (auto m = Ask(id, [&](SecAggClient& c) { return c.SignRoster(carried); })) {
      const RosterSignature s = OverTheWire(*m);
      roster_signatures_[{id, RosterDigest(roster)}] = s.signature;
      nonces_[id] = s.graph_nonce;
    }
  }
  // Client `id`'s signature on the roster of digest `digest`: a colluder's
  // made (once) by the adversary, an honest client's if it signed it.
  Bytes RosterSignatureOf(int64_t id, const Bytes& digest) {
    const auto c = colluders_.find(id);
    if (c != colluders_.end() && roster_signatures_.count({id, digest}) == 0) {
      roster_signatures_[{id, digest}] =
          Sign(c->second.signing_key, RosterStatement(session_, digest, c->second.advertised));
    }
    const auto s = roster_signatures_.find({id, digest});
    return s != roster_signatures_.end() ? s->second : Bytes(kSignatureBytes, '\0');
  }
  Bytes NonceOf(int64_t id) const {
    const auto c = colluders_.find(id);
    return c != colluders_.end() ? c->second.graph_nonce : nonces_.at(id);
  }

  // The graph an honest server would draw over `roster`.
  std::map<int64_t, std::vector<int64_t>> GraphOf(const Roster& roster) const {
    std::vector<Bytes> nonces;
    for (int64_t id : roster.clients) nonces.push_back(NonceOf(id));
    return Neighbours(roster.clients, params_.graph.neighbors,
                      GraphSeed(session_, RosterDigest(roster), nonces));
  }

  // The key directory an honest server would send `id` under `roster`,
  // whose graph is `graph`.
  KeyDirectory DirectoryFor(int64_t id, const Roster& roster,
                            const std::map<int64_t, std::vector<int64_t>>& graph) {
    KeyDirectory d;
    for (int64_t v : roster.clients) d.graph_nonces.push_back(NonceOf(v));
    const Bytes digest = RosterDigest(roster);
    for (int64_t v : graph.at(id)) {
      d.peers.push_back(advertised_.at(v));
      d.roster_signatures.push_back(RosterSignatureOf(v, digest));
    }
    return d;
  }

  // Round 1: `directory` to honest `id`; the adversary decrypts the shares
  // it addresses to colluders.
  void ShowDirectory(int64_t id, const KeyDirectory& directory) {
    const KeyDirectory carried = OverTheWire(directory);
    auto m = Ask(id, [&](SecAggClient& c) { return c.Share(carried); });
    if (!m) return;
    const ShareKeys shares = OverTheWire(*m);
    share_keys_[id] = shares;
    for (const SealedShares& s : shares.shares) {
      const auto c = colluders_.find(s.peer);
      if (c == colluders_.end()) continue;
      const Bytes key = ShareKey(
          session_, X25519Agree(c->second.cipher.secret, advertised_.at(id).cipher_public), id, s.peer);
      const Bytes plain = Open(key, s.sealed, ShareAad(session_, id, s.peer));
      Learn(id, ShareKind::kMaskKey, s.peer, plain.substr(16, kShareBytes));
      Learn(id, ShareKind::kSelfMask, s.peer, plain.substr(16 + kShareBytes, kShareBytes));
    }
  }

  // Colluder `c`'s encrypted shares for honest `to` (of secrets of its own:
  // what they hold does not matter to the attack, only that they open).
  SealedShares ColluderShares(int64_t c, int64_t to) const {
    const Colluder& me = colluders_.at(c);
    const Bytes key =
        ShareKey(session_, X25519Agree(me.cipher.secret, advertised_.at(to).cipher_public), c, to);
    const Bytes plain = EncodeId(c) + EncodeId(to) + Bytes(2 * kShareBytes, '\0');
    return {c, Seal(key, plain, ShareAad(session_, c, to))};
  }

  // Round 2: a bundle of the shares of `from` (its neighbours) to honest
  // `id`, which then masks with exactly them; its masked input is kept.
  void Bundle(int64_t id, const std::vector<int64_t>& from) {
    ShareBundle bundle;
    for (int64_t v : from) {
      if (colluders_.count(v) != 0) {
        bundle.shares.push_back(ColluderShares(v, id));
        continue;
      }
      const auto sent = share_keys_.find(v);
      if (sent == share_keys_.end()) continue;
      for (const SealedShares& s : sent->second.shares) {
        if (s.peer == id) bundle.shares.push_back({v, s.sealed});
      }
    }
    const ShareBundle carried = OverTheWire(bundle);
    auto m = Ask(id, [&](SecAggClient& c) { return c.Mask(carried, inputs_.at(id)); });
    if (!m) return;
    masked_[id] = OverTheWire(*m).masked;
    for (const SealedShares& s : bundle.shares) partners_[id].push_back(s.peer);
  }

  // The honest run up to the masked inputs: every client sees U_1 = all
  // invited, its honest directory and every neighbour's shares.
  std::map<int64_t, std::vector<int64_t>> RunHonestlyToMaskedInputs() {
    Advertise();
    const Roster roster = RosterOf(All());
    for (const int64_t id : HonestIds()) ShowRoster(id, roster);
    const auto graph = GraphOf(roster);
    for (const int64_t id : HonestIds()) ShowDirectory(id, DirectoryFor(id, roster, graph));
    for (const int64_t id : HonestIds()) Bundle(id, graph.at(id));
    full_roster_ = roster;
    return graph;
  }

  // Round 3: `survivors` shown to honest `id`; its signature is kept for
  // the requests of that view.
  void ShowSurvivors(int64_t id, const std::vector<int64_t>& survivors) {
    const SurvivorList carried = OverTheWire(SurvivorList{survivors});
    if (auto m = Ask(id, [&](SecAggClient& c) { return c.Check(carried); })) {
      signatures_[survivors].push_back(OverTheWire(*m));
    }
  }

  // Round 4: the request for view `survivors` to honest `id`, carrying every
  // signature on it the adversary holds (its colluders sign any view); what
  // it reveals is kept.
  void AskToUnmask(int64_t id, const std::vector<int64_t>& survivors, const std::vector<int64_t>& dropped) {
    std::vector<ConsistencySignature>& corrupt = colluder_signatures_[survivors];
    if (corrupt.empty()) {
      const Bytes statement = ConsistencyStatement(session_, RosterDigest(full_roster_), survivors);
      for (const auto& [c, me] : colluders_) {
        if (std::binary_search(survivors.begin(), survivors.end(), c)) {
          corrupt.push_back({c, Sign(me.signing_key, statement)});
        }
      }
    }
    UnmaskRequest request{survivors, dropped, signatures_[survivors]};
    request.signatures.insert(request.signatures.end(), corrupt.begin(), corrupt.end());
    const UnmaskRequest carried = OverTheWire(request);
    auto m = Ask(id, [&](SecAggClient& c) { return c.Unmask(carried); });
    if (!m) return;
    for (const RevealedShare& s : OverTheWire(*m).shares) Learn(s.owner, s.kind, id, s.value);
  }

  // --- What the adversary can compute

  // A secret of honest `owner`, if t shares of it are known and they give
  // the committed secret (or the advertised key).
  std::optional<Bytes> Secret(int64_t owner, ShareKind kind) {
    const auto it = shares_.find({owner, kind});
    if (it == shares_.end() || static_cast<int>(it->second.size()) < params_.graph.threshold)
      return std::nullopt;
    std::vector<Share> basis;
    for (const auto& [holder, value] : it->second) {
      if (static_cast<int>(basis.size()) == params_.graph.threshold) break;
      basis.push_back({holder, value});
    }
    const Bytes secret = Reconstruct(basis, params_.graph.threshold);
    const bool right =
        kind == ShareKind::kSelfMask
            ? SelfMaskCommitment(session_, owner, secret) == share_keys_.at(owner).self_mask_commitment
            : X25519PublicOf(secret) == advertised_.at(owner).mask_public;
    if (!right) throw Error("the harness reconstructed a wrong secret of client " + std::to_string(owner));
    return secret;
  }

  // Client `id`'s mask key, if the adversary has it.
  std::optional<Bytes> MaskKey(int64_t id) {
    const auto c = colluders_.find(id);
    if (c != colluders_.end()) return c->second.mask.secret;
    return Secret(id, ShareKind::kMaskKey);
  }

  // Honest `v`'s input, if every mask on its masked input is known.
  std::optional<std::vector<Word>> Recover(int64_t v) {
    const auto y = masked_.find(v);
    if (y == masked_.end()) return std::nullopt;
    const std::optional<Bytes> b = Secret(v, ShareKind::kSelfMask);
    if (!b) return std::nullopt;
    std::vector<Word> x = y->second;
    AddPrg(*b, -1, x);
    const std::optional<Bytes> own = MaskKey(v);
    for (int64_t j : partners_[v]) {
      Bytes agreed;
      if (own) {
        agreed = X25519Agree(*own, advertised_.at(j).mask_public);
      } else if (const std::optional<Bytes> theirs = MaskKey(j)) {
        agreed = X25519Agree(*theirs, advertised_.at(v).mask_public);
      } else {
        return std::nullopt;  // a pairwise mask with an honest survivor stays on
      }
      AddPrg(PairwiseSeed(session_, agreed, v, j), v > j ? -1 : +1, x);
    }
    return x;
  }

  // No honest input can be computed from what the adversary holds.
  void ExpectNoInputRecovered() {
    for (const auto& [v, y] : masked_) {
      const std::optional<std::vector<Word>> x = Recover(v);
      EXPECT_FALSE(x.has_value()) << "client " << v << "'s input"
                                  << (x && *x == inputs_.at(v) ? " was recovered" : " was unmasked wrongly");
    }
  }

  bool Recovers(int64_t v) {
    const std::optional<std::vector<Word>> x = Recover(v);
    return x && *x == inputs_.at(v);
  }
  const std::vector<Word>& masked(int64_t v) const { return masked_.at(v); }
  const std::vector<Word>& input(int64_t v) const { return inputs_.at(v); }
  const std::vector<int64_t>& partners(int64_t v) { return partners_[v]; }
  const Roster& full_roster() const { return full_roster_; }
  const Bytes& session() const { return session_; }
  std::map<int64_t, Colluder>& colluders() { return colluders_; }
  std::map<int64_t, AdvertiseKeys>& advertised() { return advertised_; }

 private:
  void Learn(int64_t owner, ShareKind kind, int64_t holder, const Bytes& value) {
    shares_[{owner, kind}][holder] = value;
  }

  std::mt19937_64 rng_;
  SessionConfig config_;
  std::map<int64_t, Bytes> signing_;
  Bytes session_;
  RoundParams params_;
  std::map<int64_t, SecAggClient> honest_;
  std::map<int64_t, Colluder> colluders_;
  std::map<int64_t, std::vector<Word>> inputs_;
  std::map<int64_t, std::string> refused_;
  std::map<int64_t, AdvertiseKeys> advertised_;
  std::map<std::pair<int64_t, Bytes>, Bytes> roster_signatures_;  // by client and roster digest
  std::map<int64_t, Bytes> nonces_;
  Roster full_roster_;
  std::map<int64_t, ShareKeys> share_keys_;
  std::map<int64_t, std::vector<Word>> masked_;
  std::map<int64_t, std::vector<int64_t>> partners_;  // whom each honest client masked with
  std::map<std::vector<int64_t>, std::vector<ConsistencySignature>> signatures_;  // by view
  std::map<std::vector<int64_t>, std::vector<ConsistencySignature>> colluder_signatures_;
  std::map<std::pair<int64_t, ShareKind>, std::map<int64_t, Bytes>> shares_;  // by owner: holder → share
};

// The sizes every attack runs at, SecAgg+ at each and SecAgg (whose every
// client has n − 1 neighbours) up to 100.
struct Size {
  Protocol protocol;
  int n;
};
inline const std::vector<Size>& Sizes() {
  static const std::vector<Size> sizes = {{Protocol::kSecAggPlus, 10},
                                          {Protocol::kSecAgg, 10},
                                          {Protocol::kSecAggPlus, 100},
                                          {Protocol::kSecAgg, 100},
                                          {Protocol::kSecAggPlus, 1000}};
  return sizes;
}
inline std::string Name(const Size& s) { return ProtocolName(s.protocol) + " n = " + std::to_string(s.n); }

// The honest client with the most corrupt neighbours: the attacks' victim.
inline int64_t Victim(Attack& a, const std::map<int64_t, std::vector<int64_t>>& graph) {
  int64_t victim = -1;
  int most = -1;
  for (const int64_t id : a.HonestIds()) {
    const auto& n = graph.at(id);
    const int corrupt =
        static_cast<int>(std::count_if(n.begin(), n.end(), [&](int64_t v) { return !a.Honest(v); }));
    if (corrupt > most) {
      most = corrupt;
      victim = id;
    }
  }
  return victim;
}

inline void ExpectRefused(const Attack& a, int64_t id, const std::string& says) {
  const auto it = a.refused().find(id);
  ASSERT_NE(it, a.refused().end()) << "client " << id << " did not refuse";
  EXPECT_NE(it->second.find(says), std::string::npos) << it->second;
  EXPECT_EQ(it->second.find('\n'), std::string::npos) << it->second;
}

inline std::vector<int64_t> Without(std::vector<int64_t> ids, const std::set<int64_t>& gone) {
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return gone.count(id) != 0; }),
            ids.end());
  return ids;
}

}  // namespace adversary
}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_ADVERSARY_HARNESS_H_
