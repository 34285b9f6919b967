// Attacks of a malicious server on SecAgg and SecAgg+ (adversary_harness.h)
// that honest clients refuse before they reveal anything: a tiny or split
// U_1, parameters, a replayed session and a graph of the server's choosing.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fedprof/secagg/adversary_harness.h"

namespace fedprof::secagg {
namespace adversary {

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
