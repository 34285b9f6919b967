#include "fedprof/transport/in_process.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"
#include "tests/expect_error.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;
using testing_support::ExpectError;

// Client k holds 5 + k samples of two Gaussian blobs: its sample count
// tells which client a result came from. Made once, before any worker runs
// (torch's global generator is not for concurrent use).
const Dataset& Blobs(int k) {
  static const std::vector<Dataset> all = [] {
    torch::manual_seed(100);
    std::vector<Dataset> sets;
    for (int64_t n = 5; n < 5 + 8; ++n) sets.push_back(testing_support::DrawBlobs(n));
    return sets;
  }();
  return all.at(k);
}

std::vector<ClientInfo> Infos(int n) {
  std::vector<ClientInfo> infos;
  for (int k = 0; k < n; ++k) infos.push_back({k, 5 + k, -1});
  return infos;
}

FitInstructions OneEpoch() {
  Blobs(0);
  torch::manual_seed(7);
  FitInstructions ins;
  ins.round = 1;
  ins.global = std::make_shared<const FlatParams>(Flatten(*MakeModel(kBlobMlp)));
  ins.train.epochs = 1;
  ins.train.batch_size = 4;
  ins.train.lr = 0.1;
  ins.seed = 3;
  return ins;
}

struct Received {
  std::map<size_t, FitResult> by_index;
  int calls = 0;
};

// Runs Fit, keeping every result the sink is handed, by index.
Received FitAll(InProcessTransport& transport, const std::vector<ClientInstructions>& tasks) {
  Received got;
  transport.Fit(tasks, [&](size_t index, FitResult&& result) {
    ++got.calls;
    EXPECT_EQ(got.by_index.count(index), 0u) << "index " << index << " handed twice";
    got.by_index[index] = std::move(result);
    return std::string();
  });
  return got;
}

// Every client of `ids` told the same.
Received FitAll(InProcessTransport& transport, const std::vector<int>& ids,
                const FitInstructions& ins) {
  std::vector<ClientInstructions> tasks;
  for (int id : ids) tasks.push_back({id, ins});
  return FitAll(transport, tasks);
}

TEST(InProcessTransportTest, HandsEachResultOnceWithItsClientsIdAndIndex) {
  // Clients claim another id than their own: the transport's id wins.
  InProcessTransport transport(
      Infos(8), [](int id) { return Client(id + 1000, Blobs(id)); },
      /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, /*num_threads=*/2,
      [](int id, const FitInstructions&, const FitResult&) { return ResultCost{1.0 + id, 2.0 * id, 0, 0}; });
  EXPECT_EQ(transport.num_clients(), 8);
  const FitInstructions ins = OneEpoch();
  const std::vector<int> ids = {6, 0, 3, 7, 1};
  const Received got = FitAll(transport, ids, ins);
  EXPECT_EQ(got.calls, static_cast<int>(ids.size()));
  ASSERT_EQ(got.by_index.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const FitResult& r = got.by_index.at(i);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.client_id, ids[i]) << "index " << i;
    EXPECT_EQ(r.num_samples, 5 + ids[i]) << "index " << i;
    EXPECT_EQ(r.params.size(), ins.global->size());
    EXPECT_EQ(r.cost.time_s, 1.0 + ids[i]) << "the cost model's, not the measured time";
    EXPECT_EQ(r.cost.energy_j, 2.0 * ids[i]);
  }
}

TEST(InProcessTransportTest, ResultsDoNotDependOnTheThreads) {
  auto run = [](int threads) {
    InProcessTransport transport(
        Infos(6), [](int id) { return Client(id, Blobs(id)); },
        /*keep_clients=*/true, [] { return MakeModel(kBlobMlp); }, threads);
    return FitAll(transport, {5, 1, 2, 4}, OneEpoch());
  };
  const Received one = run(1), three = run(3);
  ASSERT_EQ(one.by_index.size(), 4u);
  ASSERT_EQ(three.by_index.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(one.by_index.at(i).params, three.by_index.at(i).params) << "index " << i;
    EXPECT_EQ(one.by_index.at(i).train_loss, three.by_index.at(i).train_loss);
  }
}

// FedProf's report pass with clients profiled in groups: every client's
// own profile (within float rounding of profiling alone; exactly it with
// groups of 1), the same for any number of threads, a failing client
// failing alone.
TEST(InProcessTransportTest, ProfilesInGroupsAreEachClientsOwnForAnyThreads) {
  FitInstructions ins = OneEpoch();
  ins.train.epochs = 0;
  ins.report.profile = true;
  const std::vector<int> ids = {7, 0, 3, 5, 1, 2, 6, 4};
  auto run = [&](int group, int threads) {
    InProcessTransport transport(
        Infos(8),
        [](int id) {
          if (id == 6) throw Error("client 6: data file vanished");
          return Client(id, Blobs(id));
        },
        /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, threads,
        [](int id, const FitInstructions&, const FitResult&) { return ResultCost{1.0 + id, 0, 0.5, 0}; });
    transport.set_profile_group(group);
    return FitAll(transport, ids, ins);
  };
  auto model = MakeModel(kBlobMlp);
  Unflatten(*ins.global, *model);
  for (int group : {1, 3}) {
    const Received one = run(group, 1), three = run(group, 3);
    ASSERT_EQ(one.by_index.size(), ids.size());
    ASSERT_EQ(three.by_index.size(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const FitResult& r = one.by_index.at(i);
      EXPECT_EQ(r.client_id, ids[i]);
      if (ids[i] == 6) {
        EXPECT_FALSE(r.ok);
        EXPECT_EQ(r.error, "client 6: data file vanished");
        continue;
      }
      ASSERT_TRUE(r.ok) << r.error;
      ASSERT_TRUE(r.profile.has_value());
      EXPECT_TRUE(r.params.empty());
      EXPECT_EQ(r.num_samples, 5 + ids[i]);
      EXPECT_EQ(r.cost.time_s, 1.0 + ids[i]) << "the cost model's";
      EXPECT_EQ(r.profile->mean, three.by_index.at(i).profile->mean) << "group " << group;
      EXPECT_EQ(r.profile->var, three.by_index.at(i).profile->var) << "group " << group;
      const FitResult alone = Client(ids[i], Blobs(ids[i])).Fit(ins, *model);
      if (group == 1) {
        EXPECT_EQ(r.profile->mean, alone.profile->mean);
        EXPECT_EQ(r.profile->var, alone.profile->var);
      }
      for (size_t u = 0; u < alone.profile->units(); ++u) {
        EXPECT_NEAR(r.profile->mean[u], alone.profile->mean[u],
                    1e-6 * (1 + std::fabs(alone.profile->mean[u])));
      }
    }
  }
}

// Clients whose inputs are rows of a shared table, in FedProf's report
// pass: with groups, those of fewer samples than one pass are profiled from
// the table's rows under θ, their data never built, the same for any number
// of threads and within float rounding of each client profiling alone; with
// groups of 1 every client profiles alone, bit for bit. The rows are those
// of the call's θ.
TEST(InProcessTransportTest, ClientsOfSharedInputsAreProfiledFromTheTableForAnyThreads) {
  Blobs(0);
  torch::manual_seed(11);
  const Dataset table = testing_support::DrawBlobs(300);
  // Even ids and client 9 (one pass and more) hold rows of the table; the
  // other odd ids their own blobs.
  auto rows_of = [](int id, TableRows* rows) {
    if (id % 2 == 1 && id != 9) return false;
    rows->table = 0;
    rows->rows.clear();
    for (int64_t i = 0; i < (id == 9 ? 130 : 5 + id); ++i) rows->rows.push_back((id * 37 + i * 11) % 300);
    return true;
  };
  auto data_of = [&](int id) {
    TableRows rows;
    return rows_of(id, &rows) ? Subset(table, rows.rows) : Blobs(id);
  };
  InputTables tables;
  tables.sizes = {table.size()};
  tables.inputs = [&](int, int64_t start, int64_t len) { return table.x.narrow(0, start, len); };
  FitInstructions ins = OneEpoch();
  ins.train.epochs = 0;
  ins.report.profile = true;
  FitInstructions next = ins;  // another θ
  FlatParams moved = *ins.global;
  for (float& v : moved) v *= 1.5f;
  next.global = std::make_shared<const FlatParams>(std::move(moved));
  next.model_version = 1;
  const std::vector<int> ids = {7, 0, 3, 9, 5, 1, 2, 6, 4, 8};
  struct Run {
    Received first, second;
    std::vector<int> built;
  };
  auto run = [&](int group, int threads) {
    Run r;
    r.built.assign(ids.size(), 0);
    std::mutex mutex;
    InProcessTransport transport(
        Infos(10),
        [&](int id) {
          std::lock_guard<std::mutex> lock(mutex);
          ++r.built[id];
          return Client(id, data_of(id));
        },
        /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, threads);
    transport.set_profile_group(group);
    transport.set_shared_inputs(tables, rows_of);
    r.first = FitAll(transport, ids, ins);
    r.second = FitAll(transport, ids, next);
    return r;
  };
  auto model = MakeModel(kBlobMlp);
  for (int group : {1, 4}) {
    const Run one = run(group, 1), three = run(group, 3);
    for (int id = 0; id < 10; ++id) {
      const bool from_table = group > 1 && id % 2 == 0;
      EXPECT_EQ(one.built[id], from_table ? 0 : 2) << "client " << id << ", group " << group;
    }
    for (const FitInstructions* told : {&ins, &next}) {
      const Received& got = told == &ins ? one.first : one.second;
      const Received& got3 = told == &ins ? three.first : three.second;
      ASSERT_EQ(got.by_index.size(), ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        const FitResult& r = got.by_index.at(i);
        ASSERT_TRUE(r.ok) << r.error;
        ASSERT_TRUE(r.profile.has_value());
        EXPECT_EQ(r.client_id, ids[i]);
        EXPECT_EQ(r.num_samples, data_of(ids[i]).size());
        EXPECT_EQ(r.profile->version, told->model_version);
        EXPECT_EQ(r.profile->mean, got3.by_index.at(i).profile->mean) << "group " << group;
        EXPECT_EQ(r.profile->var, got3.by_index.at(i).profile->var) << "group " << group;
        const FitResult alone = Client(ids[i], data_of(ids[i])).Fit(*told, *model);
        if (group == 1) {
          EXPECT_EQ(r.profile->mean, alone.profile->mean);
          EXPECT_EQ(r.profile->var, alone.profile->var);
        }
        for (size_t u = 0; u < alone.profile->units(); ++u) {
          EXPECT_NEAR(r.profile->mean[u], alone.profile->mean[u],
                      1e-6 * (1 + std::fabs(alone.profile->mean[u])));
          EXPECT_NEAR(r.profile->var[u], alone.profile->var[u],
                      1e-6 * (1 + alone.profile->var[u]));
        }
      }
    }
  }
}

TEST(InProcessTransportTest, AFailingClientYieldsOneFailedResult) {
  InProcessTransport transport(
      Infos(4),
      [](int id) {
        if (id == 2) throw Error("client 2: data file vanished");
        return Client(id, Blobs(id));
      },
      /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, /*num_threads=*/2);
  const std::vector<int> ids = {0, 2, 3};
  const Received got = FitAll(transport, ids, OneEpoch());
  ASSERT_EQ(got.by_index.size(), 3u);
  EXPECT_EQ(got.calls, 3);
  const FitResult& failed = got.by_index.at(1);
  EXPECT_FALSE(failed.ok);
  EXPECT_FALSE(failed.timed_out);
  EXPECT_EQ(failed.client_id, 2);
  EXPECT_EQ(failed.error, "client 2: data file vanished");
  EXPECT_TRUE(failed.params.empty());
  EXPECT_TRUE(got.by_index.at(0).ok);
  EXPECT_TRUE(got.by_index.at(2).ok);
}

TEST(InProcessTransportTest, KeptClientsAreMadeOnceOthersForEveryTask) {
  for (bool keep : {true, false}) {
    std::atomic<int> made{0};
    InProcessTransport transport(
        Infos(4),
        [&](int id) {
          ++made;
          return Client(id, Blobs(id));
        },
        keep, [] { return MakeModel(kBlobMlp); }, /*num_threads=*/2);
    FitInstructions report = OneEpoch();
    report.train.epochs = 0;
    report.report.loss = true;
    FitAll(transport, {0, 1, 2}, report);
    FitAll(transport, {1, 2, 3}, report);
    EXPECT_EQ(made.load(), keep ? 4 : 6) << "keep_clients " << keep;
  }
}

TEST(InProcessTransportTest, EachClientGetsItsOwnInstructions) {
  InProcessTransport transport(
      Infos(4), [](int id) { return Client(id, Blobs(id)); },
      /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, /*num_threads=*/2);
  FitInstructions trains = OneEpoch();
  FitInstructions reports = trains;  // the same θ, shared
  reports.train.epochs = 0;
  reports.report.loss = true;
  const Received got = FitAll(transport, {{3, trains}, {1, reports}, {0, trains}});
  ASSERT_EQ(got.by_index.size(), 3u);
  for (size_t i : {0u, 2u}) {
    const FitResult& r = got.by_index.at(i);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.params.size(), trains.global->size()) << "index " << i << " trained";
    EXPECT_EQ(r.pre_train_loss, 0) << "index " << i << " was not asked for a loss";
  }
  const FitResult& reported = got.by_index.at(1);
  EXPECT_EQ(reported.client_id, 1);
  EXPECT_TRUE(reported.params.empty()) << "a report returns no model";
  EXPECT_GT(reported.pre_train_loss, 0);
}

// Client states as a checkpoint holds them: `batch_norm` (FedBN) and
// `algorithm` (the client algorithm's), each an object by client id.
std::string Kept(const std::string& batch_norm_entries) {
  return "{\"algorithm\":{},\"batch_norm\":{" + batch_norm_entries + "}}";
}

TEST(InProcessTransportTest, ClientStatesRoundTripAndForeignOnesAreRefused) {
  InProcessTransport transport(
      Infos(3), [](int id) { return Client(id, Blobs(id)); },
      /*keep_clients=*/false, [] { return MakeModel(kBlobMlp); }, /*num_threads=*/1);
  const std::string none = "{\"algorithm\":{},\"batch_norm\":{}}";
  EXPECT_EQ(transport.SaveState(), none);
  const std::string states = "{\"algorithm\":{\"1\":\"" + EncodeFloats({0.5f}) + "\"},\"batch_norm\":{\"0\":\"" +
                             EncodeFloats({1.5f, -2.0f}) + "\",\"2\":\"" + EncodeFloats({3.0f}) + "\"}}";
  transport.LoadState(states);
  EXPECT_EQ(transport.SaveState(), states);
  transport.LoadState("");
  EXPECT_EQ(transport.SaveState(), none) << "empty: no client keeps state";
  ExpectError([&] { transport.LoadState("{\"batch_norm\": {}}"); }, "client states");

  ExpectError([&] { transport.LoadState("[1, 2]"); }, "not a JSON object");
  ExpectError([&] { transport.LoadState(Kept("\"3\": \"\"")); },
              {"state of client '3'", "the 3 clients"});
  ExpectError([&] { transport.LoadState(Kept("\"-1\": \"\"")); }, "state of client '-1'");
  ExpectError([&] { transport.LoadState(Kept("\"one\": \"\"")); }, "state of client 'one'");
  // Another spelling of an id names no client (it would collapse onto client 1).
  ExpectError([&] { transport.LoadState(Kept("\"01\": \"\"")); }, "state of client '01'");
  ExpectError([&] { transport.LoadState(Kept("\"1abc\": \"\"")); }, "state of client '1abc'");
  ExpectError([&] { transport.LoadState("{\"0\": 5}"); }, "client states");
  ExpectError([&] { transport.LoadState("{\"0\": "); }, "client states");
}

}  // namespace
}  // namespace fedprof
