#include "fedprof/privacy/noise_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "tests/expect_error.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

std::vector<uint64_t> Draw(RandomBits& bits, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) out.push_back(bits.Next());
  return out;
}

// Seeded bits are the seed's stream itself; keyed ones are the key's for a
// use, the same whenever asked and another for another key, label or
// context; secret ones never repeat.
TEST(NoiseSourceTest, EachKindDrawsWhatItSays) {
  Rng reference = MakeRng(3, Stream::kDpNoise, {1});
  std::vector<uint64_t> expected;
  for (int i = 0; i < 2000; ++i) expected.push_back(reference());
  const NoiseSource seeded;
  EXPECT_EQ(Draw(*NoiseBits(seeded, "client", "", MakeRng(3, Stream::kDpNoise, {1})), 2000), expected);

  NoiseSource keyed{NoiseKind::kKeyed, std::string(32, 'k')};
  const auto a = Draw(*NoiseBits(keyed, "client", "task 1", Rng(1)), 2000);  // past one block of words
  EXPECT_EQ(Draw(*NoiseBits(keyed, "client", "task 1", Rng(2)), 2000), a) << "the key's, not the seed's";
  EXPECT_NE(Draw(*NoiseBits(keyed, "client", "task 2", Rng(1)), 2000), a);
  EXPECT_NE(Draw(*NoiseBits(keyed, "central", "task 1", Rng(1)), 2000), a);
  NoiseSource other{NoiseKind::kKeyed, std::string(32, 'l')};
  EXPECT_NE(Draw(*NoiseBits(other, "client", "task 1", Rng(1)), 2000), a);
  EXPECT_NE(NoiseRng(keyed, "sample", "1", Rng(5))(), NoiseRng(other, "sample", "1", Rng(5))());
  EXPECT_EQ(NoiseRng(keyed, "sample", "1", Rng(5))(), NoiseRng(keyed, "sample", "1", Rng(6))());

  const NoiseSource secret{NoiseKind::kSecret, ""};
  EXPECT_NE(Draw(*NoiseBits(secret, "client", "task 1", Rng(1)), 4),
            Draw(*NoiseBits(secret, "client", "task 1", Rng(1)), 4));
  // Half the bits set, as a uniform source's are (sd of the count: 91).
  int ones = 0;
  for (uint64_t w : a) ones += __builtin_popcountll(w);
  EXPECT_NEAR(ones, 64000, 500);

  EXPECT_EQ(ParseNoiseKind("keyed"), NoiseKind::kKeyed);
  ExpectError([] { ParseNoiseKind("seed"); }, "dp.noise: 'seed' is not seeded, secret or keyed");
  NoiseSource short_key{NoiseKind::kKeyed, "abc"};
  ExpectError([&] { NoiseBits(short_key, "client", "", Rng(1)); }, "a key of 3 bytes, expected 32");
}

// A key file is 64 hex digits, its owner's alone; a new one never replaces
// a file; a server's key serves one run (resumed as often as need be).
TEST(NoiseSourceTest, KeyFilesAreTheirOwnersAndServeOneRun) {
  const std::string dir = testing_support::FreshDir("NoiseSourceTest", "keys");
  const std::string path = ServerNoiseKeyPath(dir);
  WriteNewNoiseKey(path);
  EXPECT_EQ(ReadNoiseKey(path).size(), 32u);
  ExpectError([&] { WriteNewNoiseKey(path); }, "exists already");
  ExpectError([&] { ReadNoiseKey(ClientNoiseKeyPath(dir, 4)); }, {"client-4.dp.key: no such file", "fedprof keygen"});
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ExpectError([&] { ReadNoiseKey(path); }, "readable by others than its owner");
  const std::string bad = dir + "/bad.dp.key";
  WriteNewFile(bad, "not hex at all\n", 0600);
  ExpectError([&] { ReadNoiseKey(bad); }, "not a DP noise key (64 hex digits)");

  ClaimNoiseKey(path, "/runs/a", /*resume=*/false);
  ClaimNoiseKey(path, "/runs/a", /*resume=*/true);
  ExpectError([&] { ClaimNoiseKey(path, "/runs/b", false); }, {"served run /runs/a already", "one key serves one run"});
  // A new run in the same directory is another run.
  ExpectError([&] { ClaimNoiseKey(path, "/runs/a", false); }, "served run /runs/a already");
  ExpectError([&] { ClaimNoiseKey(path, "/runs/b", true); }, "served run /runs/a already");
}

}  // namespace
}  // namespace fedprof
