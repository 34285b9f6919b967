// Secure aggregation (secagg/): the primitives, the parameter choice, the
// state machines of SecAgg and SecAgg+ run in process over their wire
// messages, and what the server may and may not learn.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/files.h"
#include "fedprof/secagg/client.h"
#include "fedprof/secagg/crypto.h"
#include "fedprof/secagg/graph.h"
#include "fedprof/secagg/in_process.h"
#include "fedprof/secagg/server.h"
#include "fedprof/secagg/shamir.h"
#include "fedprof/secagg/wire.h"
#include "tests/expect_error.h"

namespace fedprof::secagg {
namespace {

using testing_support::ExpectError;

// A population of clients 0..k-1 (ids spaced to look like real ones) with
// their signing keys, and the public session configuration.
struct Population {
  SessionConfig config;
  std::map<int64_t, Bytes> signing_keys;
};

Population MakePopulation(Protocol protocol, int clients, size_t length, int threshold = 0,
                          int neighbors = 0, Tolerance tolerance = {}) {
  Population p;
  p.config.run_id = RandomBytes(kKeyBytes);
  p.config.round = 1;
  p.config.nonce = RandomBytes(kKeyBytes);
  p.config.protocol = protocol;
  p.config.length = length;
  p.config.threshold = threshold;
  p.config.neighbors = neighbors;
  p.config.tolerance = tolerance;
  for (int i = 0; i < clients; ++i) {
    const int64_t id = 3 * i + 1;
    const KeyPair k = GenerateEd25519();
    p.config.verify_keys[id] = k.public_key;
    p.signing_keys[id] = k.secret;
  }
  p.config.graph = ParamsFor(p.config).graph;  // the server's choice, which the clients share
  return p;
}

// An honest server and its clients, stepped by hand up to the key
// directories (ShareKeys is next).
struct Stepped {
  explicit Stepped(const Population& p) : server(p.config) {
    for (const auto& [id, key] : p.signing_keys) {
      clients[id] = std::make_unique<SecAggClient>(p.config, id, key);
      server.ReceiveAdvertise(id, clients[id]->Advertise());
    }
    roster = server.CloseAdvertise();
    for (auto& [id, c] : clients) server.ReceiveRosterSignature(id, c->SignRoster(roster));
    directories = server.CloseRoster();
  }
  // Runs every client through ShareKeys and MaskedInputCollection.
  void ShareAndMask(const std::map<int64_t, std::vector<Word>>& inputs) {
    for (auto& [id, d] : directories) server.ReceiveShares(id, clients[id]->Share(d));
    for (auto& [id, b] : server.CloseShares()) server.ReceiveMasked(id, clients[id]->Mask(b, inputs.at(id)));
  }
  SecAggServer server;
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  Roster roster;
  std::map<int64_t, KeyDirectory> directories;
};

// Each client's model and sample count: normal values, and the extremes a
// valid result may hold (values at 2^40 / n, tiny, zero, negative zero).
struct Models {
  std::map<int64_t, FlatParams> params;
  std::map<int64_t, int64_t> samples;
};

Models MakeModels(const Population& p, size_t num_params, bool extreme, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Models m;
  for (const auto& entry : p.config.verify_keys) {
    const int64_t id = entry.first;
    const int64_t n = extreme ? (id % 2 == 0 ? kMaxModelSumWeight : 1)
                              : static_cast<int64_t>(1 + rng() % 5000);
    FlatParams w(num_params);
    for (size_t i = 0; i < num_params; ++i) {
      w[i] = normal(rng) * (extreme ? 50.0f : 1.0f);  // below 2^40 / 2^31 = 512
    }
    if (extreme) {
      // Largest float below 2^40 / n, its negative, a subnormal, −0.
      const float top = std::nextafter(static_cast<float>(0x1p40 / static_cast<double>(n)), 0.0f);
      w[0] = top;
      w[1] = -top;
      w[2] = std::numeric_limits<float>::denorm_min();
      w[3] = -0.0f;
      w[4] = 1e-30f;
    }
    m.params[id] = std::move(w);
    m.samples[id] = n;
  }
  return m;
}

std::map<int64_t, std::vector<Word>> TermInputs(const Models& m) {
  std::map<int64_t, std::vector<Word>> inputs;
  for (const auto& [id, w] : m.params) inputs[id] = ModelSum::TermWords(w, m.samples.at(id));
  return inputs;
}

// The plain exact sum of the clients in `survivors`.
ModelSum PlainSum(const Models& m, const std::vector<int64_t>& survivors) {
  ModelSum sum;
  sum.Reset(m.params.begin()->second.size());
  for (int64_t id : survivors) sum.Add(m.params.at(id), m.samples.at(id));
  return sum;
}

ModelSum SecureSum(const SessionReport& report) {
  return ModelSum::FromTermWords(report.result.sum,
                                 static_cast<int64_t>(report.result.survivors.size()), "secagg");
}

std::vector<int64_t> Ids(const Population& p) {
  std::vector<int64_t> ids;
  for (const auto& entry : p.config.verify_keys) ids.push_back(entry.first);
  return ids;
}

std::vector<int64_t> Without(std::vector<int64_t> ids, const std::set<int64_t>& gone) {
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int64_t id) { return gone.count(id) != 0; }),
            ids.end());
  return ids;
}

// ---------------------------------------------------------------- primitives

TEST(SecAggPrimitives, TheFieldPrimeIsPrimeAndAboveEverySecret) {
  EXPECT_TRUE(FieldPrimeIsPrime());
  const Bytes top(kKeyBytes, '\xff');  // 2^256 − 1 is a field element
  const std::vector<Share> shares = ShareSecret(top, 2, {0, 1, 2});
  EXPECT_EQ(Reconstruct({shares[0], shares[2]}, 2), top);
}

TEST(SecAggPrimitives, AnyThresholdOfSharesReconstructsAndFewerOrWrongOnesDoNot) {
  const Bytes secret = RandomBytes(kKeyBytes);
  const std::vector<int64_t> holders = {4, 7, 9, 12, 30};
  const std::vector<Share> shares = ShareSecret(secret, 3, holders);
  ASSERT_EQ(shares.size(), holders.size());
  for (size_t a = 0; a < shares.size(); ++a) {
    for (size_t b = a + 1; b < shares.size(); ++b) {
      for (size_t c = b + 1; c < shares.size(); ++c) {
        EXPECT_EQ(Reconstruct({shares[a], shares[b], shares[c]}, 3), secret);
      }
    }
  }
  EXPECT_TRUE(OnPolynomial({shares[0], shares[1], shares[2]}, shares[4]));
  Share wrong = shares[1];
  wrong.value[kShareBytes - 1] ^= 1;
  EXPECT_FALSE(OnPolynomial({shares[0], shares[2], shares[3]}, wrong));
  try {
    EXPECT_NE(Reconstruct({shares[0], wrong, shares[2]}, 3), secret);
  } catch (const Error&) {
    // a wrong share may also give a value beyond 256 bits: refused either way
  }
  ExpectError([&] { Reconstruct({shares[0], shares[1]}, 3); }, "2 shares");
  ExpectError([&] { Reconstruct({shares[0], shares[0], shares[1]}, 3); }, "two shares");
  Share huge = shares[2];
  huge.value.assign(kShareBytes, '\xff');
  ExpectError([&] { Reconstruct({shares[0], shares[1], huge}, 3); }, "not a field element");
  ExpectError([&] { ShareSecret(secret, 6, holders); }, "threshold 6");
  ExpectError([&] { ShareSecret(secret, 2, {1, 1}); }, "listed twice");
}

TEST(SecAggPrimitives, KeyAgreementEncryptionSignaturesAndPrg) {
  const KeyPair a = GenerateX25519(), b = GenerateX25519();
  EXPECT_EQ(X25519Agree(a.secret, b.public_key), X25519Agree(b.secret, a.public_key));
  EXPECT_EQ(X25519PublicOf(a.secret), a.public_key);
  ExpectError([&] { X25519Agree(a.secret, Bytes(kKeyBytes, '\0')); }, "degenerate");
  ExpectError([&] { X25519Agree(a.secret, "short"); }, "public key of 5 bytes");

  const Bytes key = Hkdf(X25519Agree(a.secret, b.public_key), "test");
  const Bytes sealed = Seal(key, "secret shares", "aad");
  EXPECT_EQ(Open(key, sealed, "aad"), "secret shares");
  Bytes flipped = sealed;
  flipped[kNonceBytes] ^= 1;
  ExpectError([&] { Open(key, flipped, "aad"); }, "authentication");
  ExpectError([&] { Open(key, sealed, "other aad"); }, "authentication");
  ExpectError([&] { Open(key, sealed.substr(0, 20), "aad"); }, "shorter than its nonce");

  const KeyPair s = GenerateEd25519();
  const Bytes sig = Sign(s.secret, "U_3");
  EXPECT_TRUE(Verify(s.public_key, "U_3", sig));
  EXPECT_FALSE(Verify(s.public_key, "U_4", sig));
  EXPECT_FALSE(Verify(GenerateEd25519().public_key, "U_3", sig));
  EXPECT_FALSE(Verify(s.public_key, "U_3", sig.substr(1)));
  // Verified before, and remembered (crypto.cc): each of its bytes still
  // counts, in the key, the message and the signature, asked again and
  // again, and a signature that failed fails each time.
  for (int repeat = 0; repeat < 3; ++repeat) {
    EXPECT_TRUE(Verify(s.public_key, "U_3", sig));
    for (size_t i = 0; i < sig.size(); i += 7) {
      Bytes bad = sig;
      bad[i] ^= 0x01;
      EXPECT_FALSE(Verify(s.public_key, "U_3", bad)) << i;
      Bytes other_key = s.public_key;
      other_key[i % kKeyBytes] ^= 0x01;
      EXPECT_FALSE(Verify(other_key, "U_3", sig)) << i;
    }
    EXPECT_FALSE(Verify(s.public_key, "U_3 ", sig));
    EXPECT_FALSE(Verify(s.public_key, "U_", sig));
  }

  // The PRG is a function of its seed; +1 then −1 cancels exactly.
  const Bytes seed = RandomBytes(kKeyBytes);
  std::vector<Word> x(10000, 0), y(10000, 0);
  AddPrg(seed, +1, x);
  AddPrg(seed, +1, y);
  EXPECT_EQ(x, y);
  EXPECT_NE(std::count(x.begin(), x.end(), Word{0}), 10000);
  AddPrg(seed, -1, x);
  EXPECT_EQ(std::count(x.begin(), x.end(), Word{0}), 10000);
  std::vector<Word> z(10000, 0);
  AddPrg(RandomBytes(kKeyBytes), +1, z);
  EXPECT_NE(y, z);
}

// ---------------------------------------------------------------- parameters

TEST(SecAggGraph, SecAggIsTheCompleteGraphAndSecAggPlusGrowsLogarithmically) {
  const GraphParams full = ChooseGraph(Protocol::kSecAgg, 100, Tolerance{});
  EXPECT_EQ(full.neighbors, 99);
  // An active server with c = 10 corrupt clients must not reach t shares of
  // both kinds: 2t > k + c.
  EXPECT_GT(2 * full.threshold, full.neighbors + 10);
  int previous = 0;
  for (int n : {100, 500, 1000, 5000}) {
    const GraphParams plus = ChooseGraph(Protocol::kSecAggPlus, n, Tolerance{});
    EXPECT_EQ(plus.neighbors % 2, 0) << n;
    EXPECT_GT(2 * plus.threshold, plus.neighbors) << n;
    EXPECT_LE(plus.threshold, plus.neighbors) << n;
    EXPECT_GE(plus.neighbors, previous) << n;
    // O(log n): far below n for large n.
    EXPECT_LT(plus.neighbors, 30 * std::log2(n)) << n;
    previous = plus.neighbors;
    // The bounds the choice promises: the corrupt neighbours of an honest
    // client stay below 2t − k (among the fewest others U_1 may hold), and t
    // of its neighbours stay to answer.
    const Tolerance t;
    const int corrupt = CorruptBound(n, t), dropped = DropoutBound(n, t);
    EXPECT_EQ(corrupt, n / 10);
    EXPECT_LE(Log2HypergeometricTail(n - dropped - 1, corrupt, plus.neighbors,
                                     2 * plus.threshold - plus.neighbors) + std::log2(n),
              -t.security_bits);
    EXPECT_LE(Log2HypergeometricTail(n - 1, dropped, plus.neighbors,
                                     plus.neighbors - plus.threshold + 1) + std::log2(n),
              -t.correctness_bits);
  }
  EXPECT_LT(ChooseGraph(Protocol::kSecAggPlus, 1000, Tolerance{}).neighbors, 999);
}

// The parameters hold against a server that shows some of a victim's
// neighbours a survivor set with the victim (they reveal shares of its self
// mask) and the others one without it (they reveal shares of its mask key):
// with X corrupt neighbours revealing both, every split of the honest ones
// leaves one kind short of t. The threshold an honest-but-curious server
// would allow (the smallest t > k/2) fails this for SecAgg at n = 100 with
// one corrupt client, as it did before the bound was the active one.
TEST(SecAggGraph, NoSplitOfTheNeighboursGivesTheServerBothSecrets) {
  for (const Protocol protocol : {Protocol::kSecAgg, Protocol::kSecAggPlus}) {
    for (const int n : {10, 100, 1000}) {
      const Tolerance tol;
      const GraphParams g = ChooseGraph(protocol, n, tol);
      const int k = g.neighbors, t = g.threshold;
      // The most corrupt neighbours the choice allows (SecAgg: all c of
      // them; SecAgg+: almost surely below 2t − k).
      const int worst = protocol == Protocol::kSecAgg ? CorruptBound(n, tol) : 2 * t - k - 1;
      ASSERT_GE(worst, protocol == Protocol::kSecAgg ? 1 : 0) << n;
      for (int self_mask = 0; self_mask <= k - worst; ++self_mask) {
        const int mask_key = k - worst - self_mask;
        EXPECT_FALSE(self_mask + worst >= t && mask_key + worst >= t)
            << ProtocolName(protocol) << " n = " << n << ": both secrets from a split " << self_mask
            << " / " << mask_key;
      }
    }
  }
  EXPECT_EQ(ChooseGraph(Protocol::kSecAgg, 100, Tolerance{}).threshold, 55);
  EXPECT_FALSE(SecureAgainstActiveServer(Protocol::kSecAgg, 100, Tolerance{}, 99, 50));
  Tolerance one_corrupt;
  one_corrupt.corrupt = 0.01;
  EXPECT_FALSE(SecureAgainstActiveServer(Protocol::kSecAgg, 100, one_corrupt, 99, 50));
  EXPECT_TRUE(SecureAgainstActiveServer(Protocol::kSecAgg, 100, one_corrupt, 99, 51));
}

TEST(SecAggGraph, ExplicitParametersAreCheckedAndImpossibleTolerancesRefused) {
  EXPECT_EQ(ChooseGraph(Protocol::kSecAgg, 10, Tolerance{0.3, 0.0, 40, 20}, 0, 6).threshold, 6);
  ExpectError([&] { ChooseGraph(Protocol::kSecAgg, 10, Tolerance{}, 4); }, "complete graph");
  ExpectError([&] { ChooseGraph(Protocol::kSecAggPlus, 10, Tolerance{}, 3); }, "even");
  ExpectError([&] { ChooseGraph(Protocol::kSecAgg, 10, Tolerance{}, 0, 5); },
              "threshold 5 are not secure");
  ExpectError([&] { ChooseGraph(Protocol::kSecAgg, 10, Tolerance{0.0, 0.6, 40, 20}, 0, 5); },
              "threshold 5 are not secure");
  ExpectError([&] { ChooseGraph(Protocol::kSecAgg, 10, Tolerance{0.6, 0.3, 40, 20}); },
              "no threshold");
  ExpectError([&] { ChooseGraph(Protocol::kSecAgg, 10, Tolerance{1.5, 0.1, 40, 20}); },
              "tolerance out of range");
  ExpectError([&] { ParseProtocol("secagg++"); }, "unknown protocol");
}

TEST(SecAggGraph, TheHararyGraphIsSymmetricRegularAndTheSameForEveryParty) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(7 * i + 2);
  const Bytes seed = RandomBytes(kKeyBytes);
  const auto graph = Neighbours(ids, 8, seed);
  std::vector<int64_t> reversed(ids.rbegin(), ids.rend());
  EXPECT_EQ(Neighbours(reversed, 8, seed), graph);
  EXPECT_NE(Neighbours(ids, 8, RandomBytes(kKeyBytes)), graph);
  for (const auto& [u, neighbours] : graph) {
    EXPECT_EQ(neighbours.size(), 8u);
    for (int64_t v : neighbours) {
      EXPECT_NE(u, v);
      const auto& back = graph.at(v);
      EXPECT_TRUE(std::binary_search(back.begin(), back.end(), u));
    }
  }
}

// ---------------------------------------------------------------- exactness

struct Case {
  Protocol protocol;
  int clients;
  int threshold;  // 0: from the tolerance
  int neighbors;
  Tolerance tolerance;
  Dropouts dropouts;
  bool extreme;
};

void ExpectExact(const Case& c, size_t num_params = 40) {
  const Population p = MakePopulation(c.protocol, c.clients, num_params + 1, c.threshold,
                                      c.neighbors, c.tolerance);
  // Drop by position, so that the cases read independently of the ids.
  const Models m = MakeModels(p, num_params, c.extreme, static_cast<uint32_t>(c.clients));
  const SessionReport report = RunInProcess(p.config, p.signing_keys, TermInputs(m), c.dropouts);
  std::set<int64_t> gone(c.dropouts.before_shares.begin(), c.dropouts.before_shares.end());
  gone.insert(c.dropouts.before_masked_input.begin(), c.dropouts.before_masked_input.end());
  const std::vector<int64_t> survivors = Without(Ids(p), gone);
  EXPECT_EQ(report.result.survivors, survivors);
  EXPECT_TRUE(report.aborted.empty()) << report.aborted.begin()->second;
  EXPECT_TRUE(report.excluded.empty());
  const ModelSum plain = PlainSum(m, survivors);
  const ModelSum secure = SecureSum(report);
  EXPECT_EQ(secure.count(), plain.count());
  EXPECT_EQ(secure.weight(), plain.weight());
  EXPECT_EQ(secure.Serialize(), plain.Serialize()) << "not bit-identical";
}

// Ids are 3i + 1: the clients at positions i.
std::set<int64_t> At(std::initializer_list<int> positions) {
  std::set<int64_t> ids;
  for (int i : positions) ids.insert(3 * i + 1);
  return ids;
}

TEST(SecAggExact, SecAggWithoutDropouts) {
  ExpectExact({Protocol::kSecAgg, 5, 3, 0, {}, {}, false});
  ExpectExact({Protocol::kSecAgg, 20, 0, 0, {}, {}, false});
  ExpectExact({Protocol::kSecAgg, 5, 3, 0, {}, {}, true});
}

TEST(SecAggExact, SecAggWithDropoutsInEveryRound) {
  // 5 clients, t = 3, δ = 0.2: 4 must send masked inputs, 4 sign (a majority
  // of 5 with one corrupt) and 3 others answer for each: one dropout, at
  // each stage in turn. Before sharing keys it is simply absent; after
  // sharing, its pairwise masks are removed with its reconstructed mask key;
  // after sending its masked input, its input counts and its self mask is
  // removed with its reconstructed seed.
  const Tolerance one_drop{0.2, 0.1, 40, 20};
  for (Dropouts d : {Dropouts{{}, At({0}), {}, {}, {}}, Dropouts{{}, {}, At({2}), {}, {}},
                     Dropouts{{}, {}, {}, At({4}), {}}, Dropouts{{}, {}, {}, {}, At({1})}}) {
    ExpectExact({Protocol::kSecAgg, 5, 3, 0, one_drop, d, false});
    ExpectExact({Protocol::kSecAgg, 5, 3, 0, one_drop, d, true});
  }
  // 20 clients, t = 11, δ = 0.4: 8 drop at three stages, leaving exactly
  // t + 1 to answer, t for each survivor besides itself, and 12 signers, a
  // majority of 20 with 2 corrupt.
  Dropouts many;
  many.before_shares = At({0, 1});
  many.before_masked_input = At({5, 6, 7});
  many.after_masked_input = At({10, 11, 19});
  ExpectExact({Protocol::kSecAgg, 20, 11, 0, Tolerance{0.4, 0.1, 40, 20}, many, false});
}

TEST(SecAggExact, SecAggPlusWithAndWithoutDropouts) {
  ExpectExact({Protocol::kSecAggPlus, 20, 0, 0, {}, {}, false});
  ExpectExact({Protocol::kSecAggPlus, 20, 0, 0, {}, {}, true});
  // Explicit sparse graph: 20 clients, k = 8, t = 5; the sum must cover
  // 20 − ⌊0.2 · 20⌋ = 16 clients.
  Dropouts d;
  d.before_masked_input = At({3});
  d.after_masked_input = At({8, 9});
  ExpectExact({Protocol::kSecAggPlus, 20, 5, 8, Tolerance{0.2, 0.0, 40, 10}, d, false});
  // 100 clients with the tolerance's k and t, 10% dropping at two stages.
  Dropouts ten;
  ten.before_masked_input = At({1, 14, 27, 40, 53});
  ten.after_masked_input = At({66, 79, 92, 5, 18});
  ExpectExact({Protocol::kSecAggPlus, 100, 0, 0, {}, ten, true});
}

// Narrow words (distributed DP's b bits): inputs below 2^32 are summed
// modulo 2^32, with dropouts after sharing and after masking, and each
// masked input travels at 4 bytes a word; a client refuses an input word
// beyond the session's bits, and a party refuses words that are not whole
// bytes.
TEST(SecAggExact, NarrowWordsSumModuloTheirBitsAtTheirWidth) {
  const size_t length = 1000;
  Population p = MakePopulation(Protocol::kSecAggPlus, 12, length, 0, 0, Tolerance{0.2, 0.1, 40, 20});
  p.config.word_bits = 32;
  std::mt19937_64 rng(5);
  std::map<int64_t, std::vector<Word>> inputs;
  for (const auto& [id, key] : p.signing_keys) {
    (void)key;
    for (size_t i = 0; i < length; ++i) inputs[id].push_back(rng() & 0xffffffffu);
  }
  Dropouts d;
  d.before_masked_input = At({2});
  d.after_masked_input = At({7});
  const SessionReport report = RunInProcess(p.config, p.signing_keys, inputs, d);
  const std::vector<int64_t> survivors = Without(Ids(p), At({2}));
  ASSERT_EQ(report.result.survivors, survivors);
  std::vector<Word> expected(length, 0);
  for (int64_t id : survivors) {
    for (size_t i = 0; i < length; ++i) expected[i] = (expected[i] + inputs[id][i]) & 0xffffffffu;
  }
  EXPECT_EQ(report.result.sum, expected);
  const PartyCost& one = report.clients.at(1);
  const ClientTraffic wide = TrafficOfOneClient(12, report.params.graph.neighbors, report.params.quorum,
                                                length, kChunkWords);
  const ClientTraffic narrow = TrafficOfOneClient(12, report.params.graph.neighbors, report.params.quorum,
                                                  length, kChunkWords, 32);
  EXPECT_EQ(wide.sent - narrow.sent, static_cast<int64_t>(12 * length)) << "12 bytes a word fewer";
  EXPECT_LT(one.bytes_sent, wide.sent - static_cast<int64_t>(11 * length)) << "what a client sent";

  std::map<int64_t, std::vector<Word>> wide_input = inputs;
  wide_input.begin()->second[3] = Word{1} << 32;
  const SessionReport refused = RunInProcess(p.config, p.signing_keys, wide_input);
  ASSERT_EQ(refused.aborted.count(wide_input.begin()->first), 1u);
  EXPECT_NE(refused.aborted.at(wide_input.begin()->first).find("an input word beyond the session's 32 bits"),
            std::string::npos);
  p.config.word_bits = 12;
  ExpectError([&] { CheckConfig(p.config); }, "words of 12 bits, expected whole bytes");
  // A hostile client's chunk that is not whole 4-byte words is refused.
  MaskedInputAssembler assembler(2, "client 1", 4);
  pb::MaskedInputChunk chunk;
  chunk.set_client(1);
  chunk.set_total_words(2);
  chunk.set_words(std::string(6, '\x01'));
  ExpectError([&] { assembler.Add(chunk); }, "a masked-input chunk of 6 bytes, not whole words");
}

TEST(SecAggExact, FewerThanTheThresholdFailsTheRound) {
  const Population p = MakePopulation(Protocol::kSecAgg, 5, 11, 3, 0, Tolerance{0.2, 0.1, 40, 20});
  const Models m = MakeModels(p, 10, false, 1);
  Dropouts d;
  d.before_masked_input = At({0, 2});  // 3 masked inputs left, t + 1 = 4 needed
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), d); },
              {"the round fails", "3 masked inputs, fewer than the 4"});
  Dropouts answers;
  answers.after_masked_input = At({0});
  answers.before_unmasking = At({3});  // 3 answer: a survivor has 2 others, t = 3
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), answers); },
              {"the round fails", "only 2 shares of client", "threshold 3"});
  Dropouts late;
  late.after_masked_input = At({0, 1, 2});  // 2 sign, 4 needed
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), late); },
              {"the round fails", "2 consistency signatures, 4 needed"});
  Dropouts unrevealed;
  unrevealed.before_roster = At({3});  // its graph nonce never comes
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), unrevealed); },
              {"the round fails", "client 10 of U_1 did not reveal its graph nonce"});
  Dropouts unmask;
  unmask.before_unmasking = At({0, 1, 2});
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), unmask); },
              {"the round fails", "2 unmasking answers"});
}

// ------------------------------------------------------ what the server holds

// The server's only buffer starts empty and, after each masked input it
// takes, equals the sum of the masked inputs so far; each masked input
// shares no word with its client's plaintext (a chance of 2^-128 a word), so
// the buffer never holds one client's input, and nothing but Finish, once
// U_3 is large enough, removes masks. No server method takes a plaintext.
TEST(SecAggServerView, TheAggregationBufferOnlyEverHoldsMaskedInputs) {
  const Population p = MakePopulation(Protocol::kSecAggPlus, 12, 301, 0, 0, {});
  const Models m = MakeModels(p, 300, false, 3);
  const auto inputs = TermInputs(m);
  const SessionReport report =
      RunInProcess(p.config, p.signing_keys, inputs, {}, {}, /*keep_snapshots=*/true);
  ASSERT_EQ(report.masked_inputs.size(), 12u);
  std::vector<Word> running(p.config.length, 0);
  for (size_t k = 0; k < report.masked_inputs.size(); ++k) {
    const MaskedInput& y = report.masked_inputs[k];
    const std::vector<Word>& x = inputs.at(y.client);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NE(y.masked[i], x[i]) << "client " << y.client << " word " << i << " unmasked";
      running[i] += y.masked[i];
    }
    EXPECT_EQ(report.buffer_snapshots[k], running);
  }
  EXPECT_EQ(SecureSum(report).Serialize(), PlainSum(m, Ids(p)).Serialize());
}

// And no code of the server's side can turn words back into a model: the
// decoder (ModelSum::FromTermWords) is reachable only from the caller of
// Finish, with the sum.
TEST(SecAggServerView, NoServerSideCodeDecodesAnInput) {
  for (const char* file : {"server.h", "server.cc", "messages.h", "messages.cc", "shamir.h",
                           "graph.h", "crypto.h", "wire.h", "wire.cc"}) {
    const std::string text =
        ReadFile(std::string(FEDPROF_SOURCE_DIR) + "/src/fedprof/secagg/" + file);
    EXPECT_EQ(text.find("model_sum.h"), std::string::npos) << file;
    EXPECT_EQ(text.find("TermWords"), std::string::npos) << file;
  }
}

// ---------------------------------------------------------- hostile servers

TEST(SecAggConsistency, HonestClientsRefuseToRevealBothSharesOfOneClient) {
  const Population p = MakePopulation(Protocol::kSecAgg, 5, 11, 3);
  const Models m = MakeModels(p, 10, false, 5);
  // A server that asks for the mask-key share of a client whose masked input
  // it holds (to strip its pairwise masks as well as its self mask).
  Interceptors both;
  both.unmask_request = [](int64_t, UnmaskRequest& r) {
    r.dropped.insert(r.dropped.begin(), r.survivors.front());
  };
  ExpectError([&] { RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, both); },
              {"the round fails", "0 unmasking answers"});
  // Each client's refusal, in its words.
  const Population q = MakePopulation(Protocol::kSecAgg, 5, 11, 3);
  Stepped session(q);
  auto& clients = session.clients;
  SecAggServer& server = session.server;
  session.ShareAndMask(TermInputs(MakeModels(q, 10, false, 6)));
  const SurvivorList u3 = server.CloseMasked();
  for (int64_t id : u3.survivors) server.ReceiveSignature(id, clients[id]->Check(u3));
  const UnmaskRequest honest = server.CloseConsistency();
  const int64_t victim = u3.survivors[2];

  UnmaskRequest bad = honest;
  bad.dropped.push_back(victim);
  ExpectError([&] { clients[u3.survivors[0]]->Unmask(bad); },
              {"aborts", "both the self-mask share and the mask-key share of client " +
                             std::to_string(victim)});
  // Telling another client that the victim dropped (a U_3 without it) does
  // not match what that client signed.
  UnmaskRequest split = honest;
  split.survivors.erase(std::find(split.survivors.begin(), split.survivors.end(), victim));
  split.dropped = {victim};
  ExpectError([&] { clients[u3.survivors[1]]->Unmask(split); }, "differs from the one signed");
  // Forged consistency signatures are refused.
  UnmaskRequest forged = honest;
  forged.signatures[0].signature[0] ^= 1;
  ExpectError([&] { clients[u3.survivors[3]]->Unmask(forged); }, "does not verify");
  // An aborted client stays aborted; an honest request to a fresh one works.
  ExpectError([&] { clients[u3.survivors[0]]->Unmask(honest); }, "aborted");
  const UnmaskResponse ok = clients[u3.survivors[4]]->Unmask(honest);
  EXPECT_EQ(ok.shares.size(), 4u);
  // And a second request to the same client is refused: one answer a session.
  ExpectError([&] { clients[u3.survivors[4]]->Unmask(honest); }, "done");
}

TEST(SecAggConsistency, ClientsRefuseABadRosterOrDirectory) {
  const Population p = MakePopulation(Protocol::kSecAgg, 4, 3, 3, 0, Tolerance{0.25, 0, 40, 20});
  const std::vector<int64_t> ids = Ids(p);
  {
    Stepped s(p);
    auto& directories = s.directories;
    KeyDirectory swapped = directories[ids[0]];
    std::swap(swapped.peers[0].mask_public, swapped.peers[1].mask_public);
    ExpectError([&] { s.clients[ids[0]]->Share(swapped); }, "did not sign these keys");
    KeyDirectory missing = directories[ids[1]];
    missing.peers.pop_back();
    ExpectError([&] { s.clients[ids[1]]->Share(missing); },
                "2 neighbour keys and 3 roster signatures for 3 neighbours");
    KeyDirectory unsigned_roster = directories[ids[2]];
    unsigned_roster.roster_signatures[1] = unsigned_roster.roster_signatures[0];
    ExpectError([&] { s.clients[ids[2]]->Share(unsigned_roster); },
                "with the U_1 this client signed");
    KeyDirectory other_nonce = directories[ids[3]];
    other_nonce.graph_nonces[0] = RandomBytes(kKeyBytes);
    ExpectError([&] { s.clients[ids[3]]->Share(other_nonce); }, "graph nonce is not the one it committed to");
  }
  // A roster naming a client that was never invited, or changing a
  // client's own commitment.
  SecAggServer server(p.config);
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  for (int64_t id : ids) {
    clients[id] = std::make_unique<SecAggClient>(p.config, id, p.signing_keys.at(id));
    server.ReceiveAdvertise(id, clients[id]->Advertise());
  }
  const Roster roster = server.CloseAdvertise();
  Roster stranger = roster;
  stranger.clients.push_back(999);
  stranger.commitments.push_back(Bytes(kCommitmentBytes, 'x'));
  ExpectError([&] { clients[ids[0]]->SignRoster(stranger); }, "U_1 names client 999, not invited");
  Roster swapped = roster;
  std::swap(swapped.commitments[0], swapped.commitments[1]);
  ExpectError([&] { clients[ids[1]]->SignRoster(swapped); }, "a graph commitment that is not its own");
  ExpectError([&] { clients[ids[3]]->Mask({}, std::vector<Word>(3)); }, "called in round");
}

// ---------------------------------------------------------- hostile clients

TEST(SecAggHostileClients, AMalformedShareIsExcludedNotAggregated) {
  const Population p = MakePopulation(Protocol::kSecAgg, 6, 21, 4, 0, Tolerance{0.2, 0.1, 40, 20});
  const Models m = MakeModels(p, 20, false, 7);
  const int64_t liar = Ids(p)[0];  // the lowest id: its shares are used first
  // A share off its polynomial (the right size): the server finds the
  // reconstruction that matches the commitment without it.
  Interceptors off;
  off.unmask_response = [&](UnmaskResponse& r) {
    if (r.client == liar) {
      for (RevealedShare& s : r.shares) s.value[kShareBytes - 1] ^= 0x5a;
    }
  };
  const SessionReport report = RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, off);
  ASSERT_EQ(report.excluded.count(liar), 1u);
  EXPECT_NE(report.excluded.at(liar).find("not on its polynomial"), std::string::npos);
  EXPECT_EQ(SecureSum(report).Serialize(), PlainSum(m, Ids(p)).Serialize());

  // A share of the wrong kind or an unknown owner: the answer is refused whole.
  Interceptors kind;
  kind.unmask_response = [&](UnmaskResponse& r) {
    if (r.client == liar) r.shares[0].kind = ShareKind::kMaskKey;
  };
  const SessionReport r2 = RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, kind);
  EXPECT_NE(r2.excluded.at(liar).find("wrong kind"), std::string::npos);
  EXPECT_EQ(SecureSum(r2).Serialize(), PlainSum(m, Ids(p)).Serialize());
}

TEST(SecAggHostileClients, MalformedCiphertextsExcludeTheirSender) {
  const Population p = MakePopulation(Protocol::kSecAgg, 6, 21, 4, 0, Tolerance{0.2, 0.1, 40, 20});
  const Models m = MakeModels(p, 20, false, 8);
  const std::vector<int64_t> ids = Ids(p);
  // Shares addressed to the wrong clients: the sender leaves at ShareKeys,
  // and the sum is that of the others.
  Interceptors misaddressed;
  misaddressed.share_keys = [&](ShareKeys& s) {
    if (s.client == ids[1]) std::swap(s.shares[0].peer, s.shares[1].peer);
  };
  const SessionReport r1 = RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, misaddressed);
  EXPECT_EQ(r1.excluded.count(ids[1]), 1u);
  EXPECT_EQ(SecureSum(r1).Serialize(), PlainSum(m, Without(ids, {ids[1]})).Serialize());
  // A ciphertext of the right size that does not authenticate: its
  // recipient complains and reveals nothing of it; the sum stays exact.
  Interceptors garbled;
  garbled.share_keys = [&](ShareKeys& s) {
    if (s.client == ids[2]) s.shares[0].sealed[kNonceBytes + 3] ^= 1;
  };
  const SessionReport r2 = RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, garbled);
  EXPECT_TRUE(r2.excluded.empty());
  EXPECT_EQ(SecureSum(r2).Serialize(), PlainSum(m, ids).Serialize());
  // A ciphertext of the wrong size does not even decode: the server
  // excludes its sender.
  Interceptors truncated;
  truncated.share_keys = [&](ShareKeys& s) {
    if (s.client == ids[3]) s.shares[0].sealed.pop_back();
  };
  const SessionReport r3 = RunInProcess(p.config, p.signing_keys, TermInputs(m), {}, truncated);
  ASSERT_EQ(r3.excluded.count(ids[3]), 1u);
  EXPECT_NE(r3.excluded.at(ids[3]).find("encrypted shares of 109 bytes"), std::string::npos);
  EXPECT_EQ(SecureSum(r3).Serialize(), PlainSum(m, Without(ids, {ids[3]})).Serialize());
}

TEST(SecAggHostileClients, TheServerRefusesMalformedMessages) {
  const Population p = MakePopulation(Protocol::kSecAgg, 4, 3, 3, 0, Tolerance{0.25, 0, 40, 20});
  const std::vector<int64_t> ids = Ids(p);
  SecAggServer server(p.config);
  SecAggClient a(p.config, ids[0], p.signing_keys.at(ids[0]));
  AdvertiseKeys keys = a.Advertise();
  EXPECT_FALSE(server.ReceiveAdvertise(ids[1], keys));  // someone else's keys
  EXPECT_EQ(server.excluded().count(ids[1]), 1u);
  AdvertiseKeys zero = keys;
  zero.mask_public = Bytes(kKeyBytes, '\0');
  EXPECT_FALSE(server.ReceiveAdvertise(ids[0], zero));  // bad signature first
  EXPECT_FALSE(server.ReceiveAdvertise(999, keys));     // not invited: ignored
  EXPECT_EQ(server.excluded().count(999), 0u);
  // Too few left: the round fails at once.
  ExpectError([&] { server.CloseAdvertise(); }, "the round fails");
  // A degenerate key, correctly signed.
  SecAggServer fresh(p.config);
  AdvertiseKeys degenerate{ids[2], GenerateX25519().public_key, Bytes(kKeyBytes, '\0'),
                           Bytes(kCommitmentBytes, 'c'), {}};
  degenerate.signature =
      Sign(p.signing_keys.at(ids[2]), AdvertisedStatement(SessionId(p.config), degenerate));
  EXPECT_FALSE(fresh.ReceiveAdvertise(ids[2], degenerate));
  EXPECT_NE(fresh.excluded().at(ids[2]).find("degenerate"), std::string::npos);
}

// ------------------------------------------------------------------- wire

TEST(SecAggWire, MessagesRoundTripAndBadSizesAreRefused) {
  const Population p = MakePopulation(Protocol::kSecAgg, 3, 5, 2, 0, Tolerance{0.0, 0, 40, 20});
  SecAggClient c(p.config, 1, p.signing_keys.at(1));
  const AdvertiseKeys keys = c.Advertise();
  const AdvertiseKeys back = FromWire(ToWire(keys), "peer");
  EXPECT_EQ(back.client, keys.client);
  EXPECT_EQ(back.signature, keys.signature);
  pb::AdvertiseKeys bad = ToWire(keys);
  bad.set_mask_public("short");
  ExpectError([&] { FromWire(bad, "client 1"); }, {"client 1", "mask public key of 5 bytes"});
  bad = ToWire(keys);
  bad.set_client(-4);
  ExpectError([&] { FromWire(bad, "client 1"); }, "negative client id");

  pb::UnmaskResponse r;
  r.set_client(1);
  pb::RevealedShare* s = r.add_shares();
  s->set_owner(4);
  s->set_kind(static_cast<pb::ShareKind>(7));
  s->set_value(Bytes(kShareBytes, 'x'));
  ExpectError([&] { FromWire(r, "client 1"); }, "share kind 7");
  s->set_kind(pb::MASK_KEY);
  s->set_value("x");
  ExpectError([&] { FromWire(r, "client 1"); }, "share of 1 bytes");

  // Masked inputs: in order, from one client, exactly the session's length.
  MaskedInput y{4, {}};
  for (int i = 0; i < 10; ++i) y.masked.push_back((Word{1} << 100) * i + 3);
  const auto chunks = ToWire(y, 4);
  ASSERT_EQ(chunks.size(), 3u);
  MaskedInputAssembler ok(10, "client 4");
  for (const auto& chunk : chunks) ok.Add(chunk);
  const MaskedInput y2 = ok.Finish();
  EXPECT_EQ(y2.masked, y.masked);
  EXPECT_EQ(y2.client, 4);
  MaskedInputAssembler skipped(10, "client 4");
  skipped.Add(chunks[0]);
  ExpectError([&] { skipped.Add(chunks[2]); }, "at word 8, expected 4");
  MaskedInputAssembler longer(9, "client 4");
  ExpectError([&] { longer.Add(chunks[0]); }, "of 10 words, the session's are 9");
  MaskedInputAssembler early(10, "client 4");
  early.Add(chunks[0]);
  ExpectError([&] { early.Finish(); }, "of 4 words");
  pb::MaskedInputChunk ragged = chunks[0];
  ragged.mutable_words()->pop_back();
  MaskedInputAssembler partial(10, "client 4");
  ExpectError([&] { partial.Add(ragged); }, "not whole words");
}

TEST(SecAggModelSum, TermWordsSumToModelSumAndGarbageIsRefused) {
  ModelSum plain;
  plain.Reset(3);
  plain.Add({1.5f, -2.25f, 1e-20f}, 7);
  plain.Add({-0.5f, 3.0f, -1e-20f}, 2);
  std::vector<Word> sum(4, 0);
  for (const auto& [w, n] : std::vector<std::pair<FlatParams, int64_t>>{
           {{1.5f, -2.25f, 1e-20f}, 7}, {{-0.5f, 3.0f, -1e-20f}, 2}}) {
    const std::vector<Word> t = ModelSum::TermWords(w, n);
    for (size_t i = 0; i < t.size(); ++i) sum[i] += t[i];
  }
  EXPECT_EQ(ModelSum::FromTermWords(sum, 2, "secagg").Serialize(), plain.Serialize());
  ExpectError([&] { ModelSum::TermWords({1e30f}, 1); }, "beyond 2^40");
  ExpectError([&] { ModelSum::TermWords({1.0f}, 0); }, "weight 0");
  // What a garbled unmasking gives (random words) is no sum of 2 terms.
  std::vector<Word> garbage(4, 0);
  AddPrg(RandomBytes(kKeyBytes), +1, garbage);
  ExpectError([&] { ModelSum::FromTermWords(garbage, 2, "secagg sum"); }, "secagg sum");
  std::vector<Word> heavy = sum;
  heavy.back() = 2 * static_cast<Word>(kMaxModelSumWeight) + 1;
  ExpectError([&] { ModelSum::FromTermWords(heavy, 2, "secagg sum"); }, "of weight -1");
}

}  // namespace
}  // namespace fedprof::secagg
