// Attacks of a malicious server on SecAgg and SecAgg+ (adversary_harness.h):
// the detector itself, survivor views split between clients, and a cohort
// too small for the colluders.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fedprof/secagg/adversary_harness.h"

namespace fedprof::secagg {
namespace adversary {

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

}  // namespace adversary
}  // namespace fedprof::secagg
