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
Message OverTheWire(const Message& message) {
  std::string bytes;
  if (!ToWire(message).SerializeToString(&bytes)) throw Error("cannot encode");
  decltype(ToWire(message)) parsed;
  if (!parsed.ParseFromString(bytes)) throw Error("cannot parse");
  return FromWire(parsed, "the server");
}

MaskedInput OverTheWire(const MaskedInput& message) {
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
const std::vector<Size>& Sizes() {
  static const std::vector<Size> sizes = {{Protocol::kSecAggPlus, 10},
                                          {Protocol::kSecAgg, 10},
                                          {Protocol::kSecAggPlus, 100},
                                          {Protocol::kSecAgg, 100},
                                          {Protocol::kSecAggPlus, 1000}};
  return sizes;
}
std::string Name(const Size& s) { return ProtocolName(s.protocol) + " n = " + std::to_string(s.n); }

// The honest client with the most corrupt neighbours: the attacks' victim.
int64_t Victim(Attack& a, const std::map<int64_t, std::vector<int64_t>>& graph) {
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

void ExpectRefused(const Attack& a, int64_t id, const std::string& says) {
  const auto it = a.refused().find(id);
  ASSERT_NE(it, a.refused().end()) << "client " << id << " did not refuse";
  EXPECT_NE(it->second.find(says), std::string::npos) << it->second;
  EXPECT_EQ(it->second.find('\n'), std::string::npos) << it->second;
}

std::vector<int64_t> Without(std::vector<int64_t> ids, const std::set<int64_t>& gone) {
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return gone.count(id) != 0; }),
            ids.end());
  return ids;
}

// ------------------------------------------------------------ the detector

// The search is able to find an input: an honest-but-curious server already
// holds each masked input, and with more corrupt clients than the
// parameters assume (every neighbour of a client) it unmasks that client
// exactly. Removing only the self mask, or only the pairwise masks of a
// client declared dropped after its masked input arrived, gives nothing.
TEST(SecAggAdversary, TheSearchFindsAnInputOnlyWhenEveryMaskIsKnown) {
  Attack a(Protocol::kSecAggPlus, 20, 0, 1);
  const auto graph = a.RunHonestlyToMaskedInputs();
  const std::vector<int64_t> all = a.All();
  // Client `dropped` is declared dropped although its masked input arrived;
  // `kept` survives. Every other client is asked to unmask.
  const int64_t dropped = all[3], kept = all[11];
  const std::vector<int64_t> survivors = Without(all, {dropped});
  for (const int64_t id : survivors) a.ShowSurvivors(id, survivors);
  for (const int64_t id : survivors) a.AskToUnmask(id, survivors, {dropped});
  EXPECT_TRUE(a.refused().empty()) << a.refused().begin()->second;
  // The server has the dropped client's mask key, not its self mask: its
  // pairwise masks come off, and what is left is not its input.
  ASSERT_TRUE(a.Secret(dropped, ShareKind::kMaskKey).has_value());
  EXPECT_FALSE(a.Secret(dropped, ShareKind::kSelfMask).has_value());
  std::vector<Word> pairwise_off = a.masked(dropped);
  for (int64_t j : a.partners(dropped)) {
    const Bytes agreed =
        X25519Agree(*a.Secret(dropped, ShareKind::kMaskKey), a.advertised().at(j).mask_public);
    AddPrg(PairwiseSeed(a.session(), agreed, dropped, j), dropped > j ? -1 : +1, pairwise_off);
  }
  EXPECT_NE(pairwise_off, a.input(dropped));
  // A survivor's self mask comes off, its pairwise masks stay.
  const std::optional<Bytes> b = a.Secret(kept, ShareKind::kSelfMask);
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(a.Secret(kept, ShareKind::kMaskKey).has_value());
  std::vector<Word> self_off = a.masked(kept);
  AddPrg(*b, -1, self_off);
  EXPECT_NE(self_off, a.input(kept));
  a.ExpectNoInputRecovered();

  // Four corrupt clients of five, where the parameters assume one: every
  // neighbour of the honest client is the server's, and the search unmasks
  // it exactly from the shares dealt to them and their own mask keys.
  Attack beyond(Protocol::kSecAgg, 5, 4, 2);
  const auto g = beyond.RunHonestlyToMaskedInputs();
  const int64_t target = beyond.HonestIds().at(0);
  EXPECT_EQ(g.at(target).size(), 4u);
  EXPECT_TRUE(beyond.Recovers(target));
}

// ------------------------------------------------------------- the attacks

// Split survivor views (finding 1): the server shows half of the victim's
// honest neighbours a U_3 with the victim (they would reveal its self mask)
// and everyone else one without it (they would reveal its mask key), its
// corrupt clients signing both. Two different U_3 cannot both carry the
// signatures of a majority of the invited clients, so the clients of at
// least one view refuse; and even the shares of both views together stay
// below t for one kind (2t > k + c). No input is recovered.
//
// Views per partner (SecAgg+'s sparse graph): each honest partner j of the
// victim is shown a U_3 that holds the victim and j but none of the
// victim's other honest partners (so that the victim's self mask and every
// partner's mask key would be revealed), the other honest clients spread
// over these views to sign them. No view has the quorum; every client
// refuses.
//
// The victim's partners dropped: one U_3 for all, without every honest
// partner of the victim but the t − X that its round-3 check demands. It is
// answered (it is a valid U_3), the victim's self mask and the dropped
// partners' mask keys come off, and the victim's input stays masked by the
// partners left in: no client is left without an honest neighbour in U_3.
// The honest clients run `honest` (by default, the default tolerance), and
// `corrupt` clients collude (by default, as many as it allows).
void SplitSurvivorViews(const Size& size, const Tolerance& honest = {}, int corrupt = -1) {
  SCOPED_TRACE(Name(size) + ", " + std::to_string(corrupt) + " colluders");
  Attack base(size.protocol, size.n, corrupt >= 0 ? corrupt : CorruptBound(size.n, honest),
              static_cast<uint32_t>(size.n), honest);
  const auto graph = base.RunHonestlyToMaskedInputs();
  ASSERT_TRUE(base.refused().empty()) << base.refused().begin()->second;
  const int64_t v = Victim(base, graph);
  std::vector<int64_t> partners;  // the victim's honest neighbours
  for (const int64_t j : graph.at(v)) {
    if (base.Honest(j)) partners.push_back(j);
  }
  const std::vector<int64_t> all = base.All(), without = Without(all, {v});
  {
    Attack a = base;
    const std::set<int64_t> with_victim(partners.begin(), partners.begin() + partners.size() / 2);
    const auto view = [&](int64_t id) { return with_victim.count(id) != 0 || id == v ? all : without; };
    for (const int64_t id : a.HonestIds()) a.ShowSurvivors(id, view(id));
    for (const int64_t j : partners) {
      a.AskToUnmask(j, view(j), with_victim.count(j) != 0 ? std::vector<int64_t>{} : std::vector<int64_t>{v});
    }
    int revealed_with = 0, revealed_without = 0;
    for (const int64_t j : partners) {
      if (a.refused().count(j) != 0) {
        ExpectRefused(a, j, "signatures on U_3");
      } else {
        ++(with_victim.count(j) != 0 ? revealed_with : revealed_without);
      }
    }
    EXPECT_TRUE(revealed_with == 0 || revealed_without == 0) << "both views were answered";
    EXPECT_FALSE(a.Secret(v, ShareKind::kSelfMask) && a.Secret(v, ShareKind::kMaskKey));
    a.ExpectNoInputRecovered();
  }
  {
    Attack a = base;
    // View j: every client but the victim's honest partners other than j.
    std::map<int64_t, std::vector<int64_t>> view_of;
    for (const int64_t j : partners) {
      std::set<int64_t> gone(partners.begin(), partners.end());
      gone.erase(j);
      view_of[j] = Without(all, gone);
    }
    size_t next = 0;
    for (const int64_t id : a.HonestIds()) {
      if (id == v) continue;
      const std::vector<int64_t>& view =
          view_of.count(id) != 0 ? view_of[id] : view_of[partners[next++ % partners.size()]];
      a.ShowSurvivors(id, view);
    }
    // The partners are asked: they hold the victim's self mask and each
    // other's mask keys.
    const std::set<int64_t> asked(partners.begin(), partners.end());
    for (const int64_t id : asked) {
      const std::vector<int64_t>& view = view_of.count(id) != 0 ? view_of[id] : view_of[partners[0]];
      std::vector<int64_t> dropped;
      for (const int64_t p : partners) {
        if (!std::binary_search(view.begin(), view.end(), p)) dropped.push_back(p);
      }
      a.AskToUnmask(id, view, dropped);
    }
    for (const int64_t id : asked) {
      ASSERT_EQ(a.refused().count(id), 1u) << "client " << id << " answered";
      const std::string& why = a.refused().at(id);
      EXPECT_TRUE(why.find("signatures on U_3") != std::string::npos ||
                  why.find("U_3 of") != std::string::npos ||
                  why.find("differs from the one signed") != std::string::npos)
          << why;
    }
    a.ExpectNoInputRecovered();
  }
  {
    // One U_3 for everyone, but without as many of the victim's honest
    // partners as the victim lets go: t of its neighbours must be in U_3,
    // so the corrupt ones and t − X honest ones stay. Everyone signs and
    // reveals; the partners left out lose their mask keys, and the
    // victim's self mask comes off. The honest partners left in keep
    // their masks with it on.
    Attack a = base;
    const int corrupt_neighbours = static_cast<int>(graph.at(v).size() - partners.size());
    const size_t keep = static_cast<size_t>(a.params().graph.threshold - corrupt_neighbours);
    ASSERT_GE(keep, 1u);
    std::set<int64_t> gone(partners.begin() + keep, partners.end());
    if (static_cast<int>(all.size() - gone.size()) < a.params().min_survivors) {
      // Only as many as U_3 may lose.
      gone = std::set<int64_t>(partners.begin() + keep,
                               partners.begin() + keep + (all.size() - a.params().min_survivors));
    }
    const std::vector<int64_t> survivors = Without(all, gone);
    const std::vector<int64_t> dropped(gone.begin(), gone.end());
    for (const int64_t id : survivors) {
      if (a.Honest(id)) a.ShowSurvivors(id, survivors);
    }
    // Asked: whoever holds shares of the victim, or of a dropped partner.
    const std::vector<int64_t> owners = {v, dropped.front()};
    std::set<int64_t> asked;
    for (const int64_t owner : owners) {
      for (const int64_t h : graph.at(owner)) {
        if (base.Honest(h) && gone.count(h) == 0) asked.insert(h);
      }
    }
    for (const int64_t id : asked) a.AskToUnmask(id, survivors, dropped);
    EXPECT_TRUE(a.refused().empty()) << "a consistent U_3 is answered: " << a.refused().begin()->second;
    EXPECT_TRUE(a.Secret(v, ShareKind::kSelfMask).has_value());
    EXPECT_TRUE(a.Secret(dropped.front(), ShareKind::kMaskKey).has_value());
    a.ExpectNoInputRecovered();
  }
}

TEST(SecAggAdversary, SplitSurvivorViewsRevealNoInput) {
  for (const Size& size : Sizes()) {
    if (size.n < 1000) SplitSurvivorViews(size);
  }
}

// The same at n = 1,000, a test of its own (the honest run alone is 900
// clients of 100 neighbours each).
TEST(SecAggAdversary, SplitSurvivorViewsRevealNoInputAtAThousand) { SplitSurvivorViews(Sizes().back()); }

// The server picks how many it invites, so it may invite all its clients
// into a small session: at n = 10, with k and t for ⌈γn⌉ = 1 colluder, two
// colluders (SecAgg+) or three (SecAgg) split a victim's neighbours. A
// client counts the colluders among its roster instead (Tolerance::fleet,
// secagg.fleet): of 30 clients, three at γ = 0.1, so its k and t hold
// against the same split views with two and three colluders at n = 10; of
// 100 clients, ten, and no k and t at all for a session of 10, which it
// refuses before it advertises a key.
TEST(SecAggAdversary, ASmallCohortDoesNotShrinkTheColluders) {
  Tolerance roster;
  roster.fleet = 30;
  for (const Protocol protocol : {Protocol::kSecAggPlus, Protocol::kSecAgg}) {
    for (const int corrupt : {2, 3}) SplitSurvivorViews({protocol, 10}, roster, corrupt);
  }
  SessionConfig server = Attack(Protocol::kSecAggPlus, 10, 0, 9).config();  // k and t for one colluder
  server.tolerance.fleet = 100;
  ExpectError([&] { SecAggClient(server, 0, RandomBytes(kKeyBytes)); },
              {"no threshold lets 10 invited clients", "10 colluders", "of a fleet of 100"});
}

// A U_1 too small, or not the one the neighbours were shown (finding 2): the
// victim is shown only itself and corrupt clients, or U_1 without some
// honest clients while its neighbours sign the whole. It refuses before
// masking anything.
TEST(SecAggAdversary, ATinyOrSplitU1IsRefused) {
  for (const Size& size : Sizes()) {
    SCOPED_TRACE(Name(size));
    Attack a(size.protocol, size.n, CorruptBound(size.n, Tolerance{}), static_cast<uint32_t>(size.n) + 1);
    a.Advertise();
    const std::vector<int64_t> honest = a.HonestIds();
    const int64_t victim = honest[0], split = honest[1];
    std::vector<int64_t> tiny = {victim};
    for (const auto& entry : a.colluders()) tiny.push_back(entry.first);
    a.ShowRoster(victim, a.RosterOf(tiny));
    ExpectRefused(a, victim,
                  "U_1 of " + std::to_string(tiny.size()) + " clients, below the " +
                      std::to_string(a.params().min_survivors) + " of " + std::to_string(size.n));
    // The largest U_1 the victim accepts, without some honest clients; the
    // others (the victim's neighbours among them) are shown all of U_1.
    const int dropped = size.n - a.params().min_survivors;
    ASSERT_GE(dropped, 1);
    std::set<int64_t> left_out(honest.begin() + 2, honest.begin() + 1 + dropped);
    left_out.insert(victim);
    const Roster smaller = a.RosterOf(Without(a.All(), left_out));
    a.ShowRoster(split, smaller);
    const Roster whole = a.RosterOf(a.All());
    for (const int64_t id : honest) {
      if (id != victim && id != split) a.ShowRoster(id, whole);
    }
    ASSERT_EQ(a.refused().count(split), 0u);
    a.ShowDirectory(split, a.DirectoryFor(split, smaller, a.GraphOf(smaller)));
    ExpectRefused(a, split, "with the U_1 this client signed");
    a.ExpectNoInputRecovered();
  }
}

// Parameters of the server's choosing (finding 2): a setup whose k and t
// are those of a server assuming no corrupt client, or a lower t than the
// client's own, is refused when the client is created: it never advertises.
TEST(SecAggAdversary, ParametersOfTheServersChoosingAreRefused) {
  for (const Size& size : Sizes()) {
    SCOPED_TRACE(Name(size));
    Attack a(size.protocol, size.n, 0, 5);
    SessionConfig server = a.config();
    Tolerance none;
    none.corrupt = 0;
    none.dropout = 0;
    server.graph = ParamsFor(size.protocol, size.n, none).graph;
    ASSERT_LT(server.graph.threshold, a.params().graph.threshold);
    ExpectError([&] { SecAggClient(server, 0, RandomBytes(kKeyBytes)); },
                {"the session's k = " + std::to_string(server.graph.neighbors),
                 "are not this party's k = " + std::to_string(a.params().graph.neighbors)});
    server.graph = a.params().graph;
    server.graph.threshold -= 1;
    ExpectError([&] { SecAggClient(server, 0, RandomBytes(kKeyBytes)); }, "are not this party's");
  }
  // A session that invites the victim and two of the server's clients:
  // refused by a client that demands ten (secagg.min_clients' default).
  SessionConfig small = Attack(Protocol::kSecAggPlus, 3, 2, 6).config();
  small.tolerance.min_clients = 10;
  ExpectError([&] { SecAggClient(small, 0, RandomBytes(kKeyBytes)); },
              "a session of 3 invited clients, fewer than the 10 this party accepts");
}

// A replayed session (finding 5): the server runs a session id again and
// hands the victim, who was not in its first run, the first run's messages
// of the others (clients it may since have unmasked). Their signatures on
// U_1 are on a U_1 without the victim's fresh commitment: the victim
// refuses before sharing anything. A client that was in the first run
// refuses the session id outright (its ledger: ClientLedgerTest).
TEST(SecAggAdversary, AReplayedSessionIsRefused) {
  for (const Size& size : Sizes()) {
    SCOPED_TRACE(Name(size));
    Attack a(size.protocol, size.n, CorruptBound(size.n, Tolerance{}), static_cast<uint32_t>(size.n) + 2);
    a.Advertise();
    const int64_t victim = a.HonestIds()[0];
    const Roster first = a.RosterOf(Without(a.All(), {victim}));
    for (const int64_t id : a.HonestIds()) {
      if (id != victim) a.ShowRoster(id, first);
    }
    // The same session again: a fresh victim; everyone else's messages of
    // the first run replayed.
    a.Rejoin(victim);
    const AdvertiseKeys fresh = OverTheWire(*a.Ask(victim, [](SecAggClient& c) { return c.Advertise(); }));
    a.advertised()[victim] = fresh;
    const Roster replayed = a.RosterOf(a.All());
    a.ShowRoster(victim, replayed);
    ASSERT_EQ(a.refused().count(victim), 0u);
    KeyDirectory d = a.DirectoryFor(victim, replayed, a.GraphOf(replayed));
    // The honest neighbours' signatures on U_1 are their first-run ones.
    const auto graph = a.GraphOf(replayed);
    for (size_t i = 0; i < graph.at(victim).size(); ++i) {
      const int64_t j = graph.at(victim)[i];
      if (a.Honest(j)) d.roster_signatures[i] = a.RosterSignatureOf(j, RosterDigest(first));
    }
    a.ShowDirectory(victim, d);
    ExpectRefused(a, victim, "with the U_1 this client signed");
  }
}

// A ground graph: once U_1 and every commitment are fixed, the graph is the
// hash of nonces no one knew all of. A directory built on a graph of the
// server's choosing (the victim among corrupt clients), a nonce chosen
// after the others were seen, or one withheld, is refused.
TEST(SecAggAdversary, AGraphOfTheServersChoosingIsRefused) {
  for (const Size& size : Sizes()) {
    SCOPED_TRACE(Name(size));
    Attack a(size.protocol, size.n, CorruptBound(size.n, Tolerance{}), static_cast<uint32_t>(size.n) + 3);
    a.Advertise();
    const Roster roster = a.RosterOf(a.All());
    for (const int64_t id : a.HonestIds()) a.ShowRoster(id, roster);
    const auto graph = a.GraphOf(roster);
    const std::vector<int64_t> honest = a.HonestIds();
    // (a) The victim's neighbours of the server's choosing: corrupt first.
    if (size.protocol == Protocol::kSecAggPlus) {
      auto chosen = graph;
      std::vector<int64_t>& around = chosen[honest[0]];
      std::vector<int64_t> corrupt;
      for (const auto& entry : a.colluders()) corrupt.push_back(entry.first);
      std::vector<int64_t> pick = corrupt;
      for (const int64_t h : honest) {
        if (h != honest[0] && pick.size() < around.size()) pick.push_back(h);
      }
      pick.resize(around.size());
      std::sort(pick.begin(), pick.end());
      if (pick == around) {
        // The nonces drew the server's choice itself (about 1 in 126 at n =
        // 10): trade its last member for a client outside it.
        for (const int64_t id : roster.clients) {
          if (id != honest[0] && !std::binary_search(pick.begin(), pick.end(), id)) {
            pick.back() = id;
            break;
          }
        }
        std::sort(pick.begin(), pick.end());
      }
      ASSERT_NE(pick, around);
      around = pick;
      a.ShowDirectory(honest[0], a.DirectoryFor(honest[0], roster, chosen));
      ExpectRefused(a, honest[0], "where neighbour");
    }
    // (b) A corrupt client's nonce chosen after the honest ones were seen.
    KeyDirectory ground = a.DirectoryFor(honest[1], roster, graph);
    const int64_t c = a.colluders().begin()->first;
    const size_t at = static_cast<size_t>(std::lower_bound(roster.clients.begin(), roster.clients.end(), c) -
                                          roster.clients.begin());
    ground.graph_nonces[at] = RandomBytes(kKeyBytes);
    a.ShowDirectory(honest[1], ground);
    ExpectRefused(a, honest[1],
                  "client " + std::to_string(c) + "'s graph nonce is not the one it committed to");
    // (c) A nonce withheld.
    KeyDirectory withheld = a.DirectoryFor(honest[2], roster, graph);
    withheld.graph_nonces.pop_back();
    a.ShowDirectory(honest[2], withheld);
    ExpectRefused(a, honest[2], "graph nonces for " + std::to_string(size.n) + " clients in U_1");
    a.ExpectNoInputRecovered();
  }
}

}  // namespace adversary
}  // namespace fedprof::secagg
