// The server's round and its relays' sums, without gRPC: results arrive as
// the handlers hand them over (Round::Close, RelayHub::DeliverSum).

#include "fedprof/deploy/server/round.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <thread>

#include "fedprof/deploy/server/relay_hub.h"

namespace fedprof::deploy {
namespace {

constexpr int64_t kParams = 4;

GrpcServerOptions Options(int num_clients, double heartbeat_timeout_s) {
  GrpcServerOptions o;
  o.num_clients = num_clients;
  o.num_params = kParams;
  o.heartbeat_timeout_s = heartbeat_timeout_s;
  o.round_timeout_s = 20;
  return o;
}

std::vector<ClientInstructions> Tasks(std::initializer_list<int> ids) {
  const auto global = std::make_shared<const FlatParams>(kParams, 0.5f);
  std::vector<ClientInstructions> tasks;
  for (int id : ids) {
    ClientInstructions t;
    t.client_id = id;
    t.instructions.round = 1;
    t.instructions.global = global;
    t.instructions.train.epochs = 1;
    tasks.push_back(t);
  }
  return tasks;
}

// The server's parts, as server.cc wires them, with no port.
struct Parts {
  explicit Parts(const GrpcServerOptions& o)
      : state(o, nullptr),
        registry(&state, {}),
        streams(&state, &registry),
        round(&state, &registry, &streams),
        relays(&state, &registry, &streams, &round) {}

  // Client `id`'s open task once the round has opened it (up to 10 s).
  Task AwaitTask(int id) {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(state.mutex);
        if (const Task* t = round.OpenTask(id)) return *t;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "no task opened for client " << id;
    return {};
  }

  // Until the round loop has accepted `n` results of batch `b` (up to 10 s).
  void AwaitAccepted(int64_t b, size_t n) {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(state.mutex);
        if (round.FindBatch(b)->awaiting.size() == n) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "batch " << b << " never held " << n << " accepted results";
  }

  // Hands client `id`'s successful result of `task` to the round.
  bool Deliver(int id, const Task& task, bool summed) {
    Arrival a;
    a.index = task.index;
    a.batch = task.batch;
    a.summed = summed;
    a.result.client_id = id;
    a.result.ok = true;
    a.result.summed = summed;
    a.result.num_samples = 100;
    std::lock_guard<std::mutex> lock(state.mutex);
    return round.Close(id, task.id, std::move(a));
  }

  ServiceState state;
  ClientRegistry registry;
  TaskStreams streams;
  Round round;
  RelayHub relays;
};

TEST(RoundTest, EachResultIsJudgedOnceAndASilentClientTimesOut) {
  Parts p(Options(2, 0.3));
  std::string session;
  pb::RegisterRequest r;
  r.set_num_samples(100);
  for (int id : {0, 1}) ASSERT_TRUE(p.registry.Register(id, r, Clock::now(), &session).ok());
  std::map<size_t, FitResult> judged;
  std::thread loop([&] {
    p.round.Fit(Tasks({0, 1}), [&](size_t index, FitResult&& result) {
      EXPECT_EQ(judged.count(index), 0u) << "judged twice";
      judged[index] = std::move(result);
      return std::string();
    });
  });
  const Task task = p.AwaitTask(0);
  EXPECT_TRUE(p.Deliver(0, task, /*summed=*/false));
  EXPECT_FALSE(p.Deliver(0, task, /*summed=*/false)) << "its task is closed";
  loop.join();
  ASSERT_EQ(judged.size(), 2u);
  EXPECT_TRUE(judged[0].ok);
  EXPECT_TRUE(judged[1].timed_out);
  EXPECT_NE(judged[1].error.find("(deploy.heartbeat_timeout_s): left the round"), std::string::npos)
      << judged[1].error;
  std::lock_guard<std::mutex> lock(p.state.mutex);
  EXPECT_EQ(p.round.OpenTask(0), nullptr) << "the round's tasks end with it";
}

// A sum no models can make (a negative weight) is refused whole: its
// results' models are lost with that reason, not as a sum that never came.
TEST(RoundTest, ARefusedRelaySumIsLostWithItsReason) {
  Parts p(Options(1, 10));
  pb::RelaySyncReply synced;
  pb::RelaySyncRequest sync;
  pb::RelayedClient* c = sync.add_clients();
  c->set_client_id(0);
  c->set_num_samples(100);
  {
    std::lock_guard<std::mutex> lock(p.state.mutex);
    p.registry.SyncRelay(3, sync, Clock::now(), &synced);
  }
  ASSERT_EQ(synced.refused_ids_size(), 0);
  std::string lost;
  bool sum_came = true;
  std::thread loop([&] {
    p.round.Fit(Tasks({0}),
                Transport::ResultSink([](size_t, FitResult&&) { return std::string(); },
                                      [&](const std::vector<size_t>& indices, const ModelSum* sum,
                                          const std::string& why) {
                                        EXPECT_EQ(indices, std::vector<size_t>{0});
                                        sum_came = sum != nullptr;
                                        lost = why;
                                        return why;
                                      }));
  });
  const Task task = p.AwaitTask(0);
  ASSERT_NE(task.batch, 0) << "a relayed client's task goes in its relay's batch";
  ASSERT_TRUE(p.Deliver(0, task, /*summed=*/true));
  p.AwaitAccepted(task.batch, 1);
  RelayHub::SumState state;
  pb::RelaySumHeader header;
  header.set_batch_id(task.batch);
  header.add_client_ids(0);
  ModelSum sum;
  sum.Reset(kParams);
  sum.Add(FlatParams(kParams, 0.0f), 7);
  std::string bytes = sum.Serialize();
  header.set_bytes(static_cast<int64_t>(bytes.size()));
  {
    std::lock_guard<std::mutex> lock(p.state.mutex);
    EXPECT_EQ(p.relays.CheckSumHeader(4, header, &state).error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << "another relay's batch";
    ASSERT_TRUE(p.relays.CheckSumHeader(3, header, &state).ok());
  }
  const int64_t negative = -5;
  std::memcpy(&bytes[sizeof(int64_t)], &negative, sizeof negative);  // Serialize's weight field
  state.bytes = bytes;
  pb::PushReply reply;
  bool finished = false;
  p.relays.DeliverSum(std::move(state), {&reply, &reply, [&] { finished = true; }});
  loop.join();
  EXPECT_TRUE(finished);
  EXPECT_FALSE(reply.accepted());
  EXPECT_NE(reply.reason().find("model sum of 1 models of weight -5"), std::string::npos) << reply.reason();
  EXPECT_FALSE(sum_came);
  EXPECT_EQ(lost.rfind("its relay's sum was refused: relay 3's sum: model sum of 1 models of weight -5", 0),
            0u)
      << lost;
}

// FedBuff's streamed tasks: each has its own deadline, a Fit call between
// them (profile reports) keeps to its own tasks and results and gives a
// client in training none, and every result is handed over once, by client.
TEST(RoundTest, StreamedTasksHaveTheirOwnDeadlinesAndOutliveAFit) {
  Parts p(Options(3, 30));
  std::string session;
  pb::RegisterRequest r;
  r.set_num_samples(100);
  for (int id : {0, 1, 2}) ASSERT_TRUE(p.registry.Register(id, r, Clock::now(), &session).ok());
  p.round.SetTimeout(2);
  const auto launched = Clock::now();
  p.round.Launch(Tasks({0}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  p.round.SetTimeout(30);
  p.round.Launch(Tasks({1}));
  const Task first = p.AwaitTask(0);
  const Task second = p.AwaitTask(1);
  EXPECT_TRUE(first.streamed);
  EXPECT_GT(second.deadline - first.deadline, std::chrono::seconds(25)) << "a deadline of its own";

  std::map<size_t, FitResult> reports;
  std::thread fit([&] {
    p.round.Fit(Tasks({2, 0}), [&](size_t index, FitResult&& result) {
      EXPECT_EQ(reports.count(index), 0u) << "judged twice";
      reports[index] = std::move(result);
      return std::string();
    });
  });
  EXPECT_TRUE(p.Deliver(2, p.AwaitTask(2), /*summed=*/false));
  fit.join();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_TRUE(reports[0].ok);
  EXPECT_FALSE(reports[1].ok);
  EXPECT_NE(reports[1].error.find("it is training task " + std::to_string(first.id)), std::string::npos)
      << reports[1].error;
  {
    std::lock_guard<std::mutex> lock(p.state.mutex);
    EXPECT_NE(p.round.OpenTask(0), nullptr) << "streamed tasks outlive the Fit call";
    EXPECT_NE(p.round.OpenTask(1), nullptr);
  }

  EXPECT_TRUE(p.Deliver(1, second, /*summed=*/false));
  std::vector<std::pair<size_t, FitResult>> handed;
  const auto sink = [&](size_t index, FitResult&& result) {
    handed.emplace_back(index, std::move(result));
    return std::string();
  };
  ASSERT_TRUE(p.round.AwaitStreamed(sink));
  ASSERT_TRUE(p.round.AwaitStreamed(sink));
  EXPECT_GE(Clock::now() - launched, std::chrono::seconds(2)) << "client 0's deadline";
  EXPECT_FALSE(p.round.AwaitStreamed(sink)) << "no streamed task is open";
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_EQ(handed[0].first, 1u);
  EXPECT_TRUE(handed[0].second.ok);
  EXPECT_EQ(handed[1].first, 0u);
  EXPECT_TRUE(handed[1].second.timed_out);
  EXPECT_NE(handed[1].second.error.find("(deploy.round_timeout_s)"), std::string::npos)
      << handed[1].second.error;
}

}  // namespace
}  // namespace fedprof::deploy
