// The index of idle online clients against a pass over the population.

#include "fedprof/sim/idle_online_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {
namespace {

std::vector<ClientInfo> ClientsOnline(int n) {
  std::vector<ClientInfo> clients;
  for (int k = 0; k < n; ++k) clients.push_back({k, 1 + k % 7, 10.0 + k % 5});
  return clients;
}

// Two models of each kind from the same seed: one for the index, one asked
// directly, so that neither sees the other's questions.
std::vector<std::pair<std::unique_ptr<Availability>, std::unique_ptr<Availability>>> Models(int n) {
  std::vector<std::pair<std::unique_ptr<Availability>, std::unique_ptr<Availability>>> models;
  const auto on_off = [n] { return std::make_unique<OnOffAvailability>(n, 40, 60, 9); };
  models.emplace_back(on_off(), on_off());
  const DiurnalShape shape{0.5, 0.8, 6, 30, 600};
  const auto diurnal = [&] { return std::make_unique<DiurnalAvailability>(n, shape, 9); };
  models.emplace_back(diurnal(), diurnal());
  std::vector<std::vector<OnlineInterval>> trace(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < k % 4; ++i) trace[k].push_back({50.0 * i + k % 13, 50.0 * i + 20 + k % 17});
  }
  models.emplace_back(std::make_unique<TraceAvailability>(trace), std::make_unique<TraceAvailability>(trace));
  models.emplace_back(nullptr, nullptr);  // always online
  return models;
}

TEST(IdleOnlineIndexTest, AnswersAsAPassOverThePopulationDoes) {
  const int n = 500;
  int kind = 0;
  for (auto& [indexed, asked] : Models(n)) {
    const std::vector<ClientInfo> population = ClientsOnline(n);
    IdleOnlineIndex index(population, indexed.get());
    std::vector<char> busy(n, 0);
    Rng rng = MakeRng(4, Stream::kSelection, {static_cast<uint64_t>(kind)});
    double t = 0;
    for (int step = 0; step < 400; ++step) {
      // Instants often repeat (several events at one time) and land on
      // period ends (the trace's whole seconds).
      t += step % 3 == 0 ? 0.0 : std::floor(Uniform01(rng) * 8);
      index.AdvanceTo(t);
      for (int j = 0; j < 5; ++j) {
        const int id = static_cast<int>(UniformIndex(rng, n));
        busy[id] = !busy[id];
        index.SetBusy(id, busy[id] != 0);
      }
      std::vector<ClientInfo> expected;
      int online = 0;
      int64_t samples = 0;
      for (const ClientInfo& c : population) {
        if (asked && asked->OnlineUntil(c.id, t) < 0) continue;
        ++online;
        samples += c.num_samples;
        if (!busy[c.id]) expected.push_back(c);
      }
      const std::string at = "model " + std::to_string(kind) + ", t = " + std::to_string(t);
      ASSERT_EQ(index.size(), static_cast<int>(expected.size())) << at;
      ASSERT_EQ(index.online(), online) << at;
      ASSERT_EQ(index.online_samples(), samples) << at;
      const std::vector<ClientInfo> idle = index.Idle();
      ASSERT_EQ(idle.size(), expected.size()) << at;
      for (size_t r = 0; r < expected.size(); ++r) {
        ASSERT_EQ(idle[r].id, expected[r].id) << at;
        ASSERT_EQ(index.At(static_cast<int>(r)).id, expected[r].id) << at << ", rank " << r;
      }
    }
    EXPECT_GT(t, 600) << "past many periods of every model, a whole diurnal day";
    ++kind;
  }
}

TEST(IdleOnlineIndexTest, RefusesTimeGoingBackAndRanksOutOfRange) {
  const std::vector<ClientInfo> three = ClientsOnline(3);
  IdleOnlineIndex index(three, nullptr);
  index.AdvanceTo(5);
  EXPECT_EQ(index.size(), 3);
  EXPECT_THROW(index.At(3), Error);
  EXPECT_THROW(index.At(-1), Error);
  EXPECT_THROW(index.AdvanceTo(4), Error);
  std::vector<ClientInfo> gap = ClientsOnline(3);
  gap[1].id = 2;
  EXPECT_THROW(IdleOnlineIndex(gap, nullptr), Error);
}

// Each model's `until` is where its answer changes: the same just before
// it and (but for the diurnal model's runs cut at 65,536 slots) another at it.
TEST(IdleOnlineIndexTest, AnAvailabilityModelsAnswerHoldsUntilItsUntil) {
  const int n = 200;
  int kind = 0;
  for (auto& [model, other] : Models(n)) {
    if (!model) continue;
    int changes = 0;
    for (int k = 0; k < n; ++k) {
      double t = 0;
      for (int i = 0; i < 20; ++i) {
        const Availability::State s = model->At(k, t);
        if (!std::isfinite(s.until)) break;
        ASSERT_GT(s.until, t) << "model " << kind << ", client " << k;
        const double before = std::nextafter(s.until, 0.0);
        EXPECT_EQ(other->At(k, before).online, s.online) << "model " << kind << ", client " << k;
        const Availability::State next = other->At(k, s.until);
        EXPECT_NE(next.online, s.online) << "model " << kind << ", client " << k << " at " << s.until;
        changes += next.online != s.online;
        t = s.until;
      }
    }
    EXPECT_GT(changes, n) << "model " << kind;
    ++kind;
  }
}

}  // namespace
}  // namespace fedprof
