#include "fedprof/distributed/distributed_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "federation.pb.h"
#include "fedprof/algorithms/algorithm.h"
#include "fedprof/client/reports.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/distributed/rank_group.h"
#include "fedprof/transport/in_process.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

// RankMessage kinds.
enum Kind : int64_t {
  // Rank 0 to a worker.
  kConfig = 1,
  kFit = 2,
  kSaveStates = 3,
  kLoadStates = 4,
  kStop = 5,
  kAbort = 6,
  // A worker to rank 0.
  kReady = 101,
  kResult = 102,
  kStates = 103,
  kAck = 104,
  kFailed = 105,
  kResults = 106,  // a ResultBatch: up to kResultsPerMessage results without a model
};

// Few, large messages: rank 0's receiving thread posts its next receive
// only once it has handed on a batch, and Gloo's event loops spin the less
// (about 2.3 million epoll_wait calls in a report pass of 200,000 clients at
// 64 results a message, 0.76 million at 1,024; docs/scale.md).
constexpr int kResultsPerMessage = 1024;

// A worker told by rank 0 to end the run.
class Aborted : public Error {
 public:
  Aborted() : Error("rank 0 ended the run with an error (its message says why)") {}
};

// The first failure among several threads.
class FirstFailure {
 public:
  void Record(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::move(e);
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_ != nullptr;
  }
  // Rethrows it; a fedprof::Error gains `prefix` (when not empty).
  void RethrowIfAny(const std::string& prefix) {
    if (!error_) return;
    if (prefix.empty()) std::rethrow_exception(error_);
    try {
      std::rethrow_exception(error_);
    } catch (const Error& e) {
      throw Error(prefix + e.what());
    }
  }

 private:
  std::mutex mutex_;
  std::exception_ptr error_;
};

// What rank 0 and a worker compare to see that they built the same clients.
std::string Fingerprint(const std::vector<ClientInfo>& clients) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the client sizes
  for (const ClientInfo& c : clients) {
    const uint64_t v = static_cast<uint64_t>(c.num_samples);
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return std::to_string(clients.size()) + " clients, sizes hash " + std::to_string(h);
}

std::string Rank(int r) { return "rank " + std::to_string(r); }

// Checks that `m` from rank `from` is of `kind`: a FAILED message is that
// rank's own error, anything else a broken protocol.
void Expect(const RankMessage& m, int from, int64_t kind) {
  if (m.kind == kFailed) throw Error(Rank(from) + " failed: " + m.bytes);
  if (m.kind != kind) {
    throw RankError(from, Rank(from) + " sent a message of kind " + std::to_string(m.kind) +
                              ", expected kind " + std::to_string(kind));
  }
}

RankMessage Message(int64_t kind, int64_t arg = 0, std::string bytes = "") {
  RankMessage m;
  m.kind = kind;
  m.arg = arg;
  m.bytes = std::move(bytes);
  return m;
}

}  // namespace

std::vector<int> AssignRanks(const std::vector<int>& client_ids, bool keeps_state, int world,
                             const std::vector<int64_t>& sizes, int group) {
  std::vector<int> rank_of(client_ids.size());
  if (keeps_state) {
    for (size_t i = 0; i < client_ids.size(); ++i) rank_of[i] = client_ids[i] % world;
    return rank_of;
  }
  // The units dealt out (clients, or groups of them) and their samples.
  std::unordered_map<int64_t, int64_t> unit_size;
  for (int id : client_ids) unit_size[ProfileGroupOf(id, group)] += sizes.at(static_cast<size_t>(id));
  std::vector<std::pair<int64_t, int64_t>> units(unit_size.begin(), unit_size.end());
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  std::vector<int64_t> load(world, 0);
  std::unordered_map<int64_t, int> rank_of_unit;
  for (const auto& [unit, size] : units) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    rank_of_unit[unit] = r;
    load[r] += size;
  }
  for (size_t i = 0; i < client_ids.size(); ++i) {
    rank_of[i] = rank_of_unit.at(ProfileGroupOf(client_ids[i], group));
  }
  return rank_of;
}

DistributedTransport::DistributedTransport(RankGroup& group, InProcessTransport& local,
                                           bool progress)
    : group_(group), local_(local), progress_(progress) {
  // Rank 0's states go into one checkpoint with the workers', whose files it cannot name.
  local_.set_inline_states(true);
  for (const ClientInfo& c : local_.Available()) sizes_.push_back(c.num_samples);
}

DistributedTransport::~DistributedTransport() {
  if (!started_ || stopped_ || group_.cancelled()) return;
  // Best effort, a few seconds at most: workers waiting for a command end
  // with "rank 0 ended the run" rather than noticing rank 0's exit.
  group_.set_timeout(std::min(group_.timeout_s(), 5.0));
  std::vector<std::thread> threads;
  for (int r = 1; r < group_.size(); ++r) {
    threads.emplace_back([this, r] {
      try {
        group_.Send(r, Message(kAbort));
      } catch (...) {
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

void DistributedTransport::ForEachWorker(const std::string& context,
                                         const std::function<void(int)>& fn,
                                         const std::function<void()>& meanwhile) {
  FirstFailure failure;
  std::vector<std::thread> threads;
  for (int r = 1; r < group_.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const RankError&) {
        failure.Record(std::current_exception());
        group_.Cancel();  // the run is over: stop waiting for the others
      } catch (...) {
        failure.Record(std::current_exception());
      }
    });
  }
  if (meanwhile) {
    try {
      meanwhile();
    } catch (...) {
      failure.Record(std::current_exception());
    }
  }
  for (std::thread& t : threads) t.join();
  failure.RethrowIfAny(Rank(group_.rank()) + ": " + context + ": ");
}

void DistributedTransport::Open() {
  started_ = true;
  const std::string fingerprint = Fingerprint(local_.Available());
  ForEachWorker("start", [&](int r) {
    const RankMessage reply = group_.Recv(r);
    Expect(reply, r, kReady);
    if (reply.bytes != fingerprint) {
      throw Error(Rank(r) + " built other clients (" + reply.bytes + ") than rank 0 (" +
                  fingerprint + "); are its data files the same?");
    }
  });
  if (!pending_state_.empty()) LoadState(std::exchange(pending_state_, std::string()));
}

std::vector<ClientDescription> DistributedTransport::Describe() { return local_.Describe(); }

int DistributedTransport::num_clients() const { return local_.num_clients(); }

std::vector<ClientInfo> DistributedTransport::Available() { return local_.Available(); }

const std::vector<ClientInfo>* DistributedTransport::VirtualPopulation(Availability** availability) {
  return local_.VirtualPopulation(availability);
}

namespace {

// Whether two clients of one call are told exactly the same (shared parts
// compared by identity: the same θ, the same encrypted reference).
bool SameInstructions(const FitInstructions& a, const FitInstructions& b) {
  const ReportRequest &ra = a.report, &rb = b.report;
  const TrainOptions &ta = a.train, &tb = b.train;
  return a.round == b.round && a.global == b.global && a.model_version == b.model_version &&
         ra.profile == rb.profile && ra.loss == rb.loss && ra.evaluate == rb.evaluate &&
         ra.sketch_dim == rb.sketch_dim && ra.public_key == rb.public_key &&
         ra.secure_reference == rb.secure_reference &&
         a.objective.prox_mu == b.objective.prox_mu &&
         a.objective.keep_local_batch_norm == b.objective.keep_local_batch_norm &&
         a.objective.algorithm == b.objective.algorithm &&
         a.objective.scaffold_correct == b.objective.scaffold_correct &&
         a.objective.feddyn_alpha == b.objective.feddyn_alpha && a.objective.moon_mu == b.objective.moon_mu &&
         a.objective.moon_tau == b.objective.moon_tau && a.algorithm_values == b.algorithm_values &&
         ta.epochs == tb.epochs && ta.batch_size == tb.batch_size && ta.lr == tb.lr &&
         ta.momentum == tb.momentum && ta.weight_decay == tb.weight_decay && a.seed == b.seed;
}

// One Fit call split over the ranks. Clients told the same share one FIT
// message per rank: one header, θ sent as the one shared copy.
struct FitPlan {
  std::vector<RankMessage> messages;  // one per distinct instructions (a "kind")
  // share[rank][kind]: the ids that rank trains under those instructions.
  std::vector<std::vector<std::vector<int32_t>>> share;
  std::vector<ClientInstructions> local;     // rank 0's share
  std::unordered_map<int, size_t> index_of;  // a client's index in the call's tasks
};

FitPlan PlanFit(const std::vector<ClientInstructions>& tasks, const std::vector<int>& rank_of,
                int world, int64_t task_id) {
  std::vector<size_t> kinds;  // index in `tasks` of each distinct instructions
  std::vector<size_t> kind_of(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    size_t k = 0;
    while (k < kinds.size() && !SameInstructions(tasks[kinds[k]].instructions, tasks[i].instructions)) {
      ++k;
    }
    if (k == kinds.size()) kinds.push_back(i);
    kind_of[i] = k;
  }
  FitPlan plan;
  for (size_t i : kinds) {
    const FitInstructions& ins = tasks[i].instructions;
    pb::TaskHeader header;
    ToWire(ins, task_id, static_cast<int64_t>(ins.global->size()), &header);
    std::shared_ptr<const FlatParams> floats = ins.global;
    if (ins.algorithm_values) {
      header.set_num_algorithm_values(static_cast<int64_t>(ins.algorithm_values->size()));
      floats = std::make_shared<const FlatParams>(ModelThenAlgorithmValues(*ins.global, *ins.algorithm_values));
    }
    plan.messages.push_back(Message(kFit, 0, header.SerializeAsString()));
    plan.messages.back().floats = std::move(floats);
  }
  plan.share.assign(world, std::vector<std::vector<int32_t>>(kinds.size()));
  for (size_t i = 0; i < tasks.size(); ++i) {
    plan.share[rank_of[i]][kind_of[i]].push_back(tasks[i].client_id);
    if (rank_of[i] == 0) plan.local.push_back(tasks[i]);
    plan.index_of[tasks[i].client_id] = i;
  }
  return plan;
}

using Deliver = std::function<std::string(FitResult&&)>;

// Receives the results rank r owes for one FIT message (`pending`, by
// client id) and hands each on; anything else from r breaks the protocol.
void ReceiveResults(RankGroup& group, int r, int64_t task_id, std::set<int> pending,
                    const Deliver& deliver) {
  // Checks that `rh` (with `values` model values) is a result rank r owes
  // for this task, and hands it on.
  auto take = [&](const pb::ResultHeader& rh, int64_t values,
                  const std::shared_ptr<const FlatParams>& floats) {
    FitResult result = FromWire(rh);
    const int64_t extra = rh.num_algorithm_values();
    if (rh.task_id() != task_id || pending.erase(result.client_id) == 0 || extra < 0 ||
        extra > values || values - extra != rh.num_params()) {
      throw RankError(r, Rank(r) + " sent a result (client " + std::to_string(result.client_id) +
                             ", task " + std::to_string(rh.task_id()) +
                             ") that is not one it owes for task " + std::to_string(task_id));
    }
    if (floats) {
      result.params = *floats;
      result.algorithm_values = TakeAlgorithmValues(&result.params, static_cast<size_t>(extra));
    }
    deliver(std::move(result));
  };
  while (!pending.empty()) {
    const RankMessage m = group.Recv(r);
    if (m.kind == kResults) {
      pb::ResultBatch batch;
      if (!batch.ParseFromString(m.bytes) || batch.results_size() > kResultsPerMessage) {
        throw RankError(r, Rank(r) + " sent a malformed batch of results");
      }
      for (const pb::ResultHeader& rh : batch.results()) take(rh, 0, nullptr);
      continue;
    }
    Expect(m, r, kResult);
    pb::ResultHeader rh;
    if (!rh.ParseFromString(m.bytes)) throw RankError(r, Rank(r) + " sent a malformed result");
    take(rh, m.floats ? static_cast<int64_t>(m.floats->size()) : 0, m.floats);
  }
}

// Rank r's share of one Fit call: a FIT message per instructions it has
// clients for, each followed by their results.
void FitOnWorker(RankGroup& group, int r, const FitPlan& plan, int64_t task_id,
                 const Deliver& deliver) {
  for (size_t k = 0; k < plan.messages.size(); ++k) {
    const std::vector<int32_t>& ids = plan.share[r][k];
    if (ids.empty()) continue;
    RankMessage mine = plan.messages[k];
    mine.ids = ids;
    group.Send(r, mine);
    ReceiveResults(group, r, task_id, std::set<int>(ids.begin(), ids.end()), deliver);
  }
}

}  // namespace

void DistributedTransport::Fit(const std::vector<ClientInstructions>& tasks,
                               const ResultSink& sink) {
  if (tasks.empty()) return;
  // Rounds trained, for Close's traffic line (reports and evaluations train nothing).
  const FitInstructions& first = tasks.front().instructions;
  if (first.train.epochs > 0 && first.round != last_training_round_) {
    last_training_round_ = first.round;
    ++training_rounds_;
  }
  std::vector<int> client_ids;
  bool keeps_state = false;
  for (const ClientInstructions& t : tasks) {
    client_ids.push_back(t.client_id);
    keeps_state = keeps_state || t.instructions.objective.keep_local_batch_norm ||
                  KeepsAlgorithmState(t.instructions.objective);
  }
  const bool profile_only = std::all_of(tasks.begin(), tasks.end(), [](const ClientInstructions& t) {
    return ProfileOnly(t.instructions);
  });
  const std::vector<int> rank_of = AssignRanks(client_ids, keeps_state, group_.size(), sizes_,
                                               profile_only ? local_.profile_group() : 1);
  if (keeps_state) may_keep_states_ = true;
  const int64_t task_id = ++task_id_;
  const FitPlan plan = PlanFit(tasks, rank_of, group_.size(), task_id);

  std::mutex sink_mutex;
  const Deliver deliver = [&](FitResult&& r) {
    std::lock_guard<std::mutex> lock(sink_mutex);
    return sink(plan.index_of.at(r.client_id), std::move(r));
  };
  const std::string round = first.train.epochs > 0
                                ? "round " + std::to_string(first.round)
                                : "reports for round " + std::to_string(first.round + 1);
  ForEachWorker(
      round, [&](int r) { FitOnWorker(group_, r, plan, task_id, deliver); },
      [&] {  // rank 0's share, trained while the other ranks' results arrive
        if (!plan.local.empty()) {
          local_.Fit(plan.local, [&](size_t, FitResult&& r) { return deliver(std::move(r)); });
        }
      });
}

std::string DistributedTransport::SaveState() {
  // Only FedBN's clients keep state; other runs save what one process would.
  if (!may_keep_states_) return local_.SaveState();
  std::vector<std::string> parts(group_.size());
  ForEachWorker("checkpoint", [&](int r) {
    group_.Send(r, Message(kSaveStates));
    RankMessage reply = group_.Recv(r);
    Expect(reply, r, kStates);
    parts[r] = std::move(reply.bytes);
  });
  parts[0] = local_.SaveState();
  nlohmann::json all = nlohmann::json::object();
  for (size_t r = 0; r < parts.size(); ++r) {
    nlohmann::json part;
    try {
      part = nlohmann::json::parse(parts[r]);
    } catch (const nlohmann::json::exception& e) {
      throw Error(Rank(static_cast<int>(r)) + " sent malformed client states: " + e.what());
    }
    if (!part.is_object()) {
      throw Error(Rank(static_cast<int>(r)) + " sent client states that are not a JSON object");
    }
    // Each kind of state (batch_norm, algorithm) is an object by client id.
    for (auto& [kind, states] : part.items()) {
      if (!states.is_object()) throw Error(Rank(static_cast<int>(r)) + " sent malformed client states");
      all[kind].update(states);
    }
  }
  return all.dump();  // keys sorted, as one process writes them
}

void DistributedTransport::LoadState(const std::string& text) {
  if (text.empty()) return;
  if (!started_) {  // the workers take their share once they are ready (Open)
    pending_state_ = text;
    return;
  }
  const int world = group_.size();
  std::vector<nlohmann::json> parts(world, nlohmann::json::object());
  bool any = false;
  try {
    const nlohmann::json states = nlohmann::json::parse(text);
    if (!states.is_object()) throw Error("checkpoint: client states are not a JSON object");
    // Each rank gets every kind of state (batch_norm, algorithm), holding its clients'.
    for (const auto& [kind, by_id] : states.items()) {
      if (!by_id.is_object()) throw Error("checkpoint: client states of '" + kind + "' are not a JSON object");
      for (nlohmann::json& part : parts) part[kind] = nlohmann::json::object();
      for (const auto& [key, value] : by_id.items()) {
        char* end = nullptr;
        const long id = std::strtol(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id >= num_clients()) {
          throw Error("checkpoint: state of client " + key + ", not one of the " +
                      std::to_string(num_clients()) + " clients of this run");
        }
        parts[id % world][kind][key] = value;
        any = true;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: client states: ") + e.what());
  }
  local_.LoadState(parts[0].dump());
  if (!any) return;
  may_keep_states_ = true;
  ForEachWorker("resume", [&](int r) {
    group_.Send(r, Message(kLoadStates, 0, parts[r].dump()));
    Expect(group_.Recv(r), r, kAck);
  });
}

std::vector<int64_t> DistributedTransport::BytesSentByRank() const {
  std::vector<int64_t> sent(group_.size(), 0);
  for (int r = 1; r < group_.size(); ++r) {
    sent[0] += group_.bytes_sent(r);
    sent[r] = group_.bytes_received(r);
  }
  return sent;
}

void SendConfig(RankGroup& group, const std::string& config_toml, bool resume) {
  FirstFailure failure;
  std::vector<std::thread> threads;
  for (int r = 1; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        group.Send(r, Message(kConfig, resume ? 1 : 0, config_toml));
      } catch (...) {
        failure.Record(std::current_exception());
        group.Cancel();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  failure.RethrowIfAny(Rank(group.rank()) + ": start: ");
}

void DistributedTransport::Close() {
  if (progress_) {
    // What the ranks sent per round (messages as Gloo carried them, startup
    // included).
    const std::vector<int64_t> sent = BytesSentByRank();
    const double scale = 1e-6 / static_cast<double>(std::max<int64_t>(1, training_rounds_));
    double mean = 0, max = 0;
    for (size_t r = 1; r < sent.size(); ++r) {
      mean += static_cast<double>(sent[r]) * scale / static_cast<double>(sent.size() - 1);
      max = std::max(max, static_cast<double>(sent[r]) * scale);
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "distributed: %zu ranks, MB sent per round (over %lld rounds): rank 0 %.3f, "
                  "each other rank %.3f on average, %.3f at most",
                  sent.size(), static_cast<long long>(training_rounds_),
                  static_cast<double>(sent[0]) * scale, mean, max);
    LogProgress(line);
  }
  ForEachWorker("stop", [&](int r) { group_.Send(r, Message(kStop)); });
  stopped_ = true;
}

namespace {

// One FIT command on a worker: trains the rank's clients and sends each
// result to rank 0 as it is made.
void ServeFit(RankGroup& group, InProcessTransport& clients, const RankMessage& m) {
  pb::TaskHeader header;
  if (!header.ParseFromString(m.bytes)) throw Error("task: malformed header from rank 0");
  FitInstructions ins = FromWire(header);
  const int64_t values = m.floats ? static_cast<int64_t>(m.floats->size()) : 0;
  const int64_t extra = header.num_algorithm_values();
  if (extra < 0 || values != header.num_params() + extra) {
    throw Error("task: a model of " + std::to_string(values) + " values, the header says " +
                std::to_string(header.num_params()) + " and " + std::to_string(extra));
  }
  if (extra == 0) {
    ins.global = m.floats ? m.floats : std::make_shared<const FlatParams>();
  } else {
    FlatParams global = *m.floats;
    ins.algorithm_values =
        std::make_shared<const FlatParams>(TakeAlgorithmValues(&global, static_cast<size_t>(extra)));
    ins.global = std::make_shared<const FlatParams>(std::move(global));
  }
  std::vector<ClientInstructions> tasks;
  for (int32_t id : m.ids) {
    if (id < 0 || id >= clients.num_clients() ||
        ((ins.objective.keep_local_batch_norm || KeepsAlgorithmState(ins.objective)) &&
         id % group.size() != group.rank())) {
      throw Error("task: client " + std::to_string(id) + " does not live on this rank");
    }
    tasks.push_back({id, ins});  // θ shared, not copied
  }
  FirstFailure failure;
  // Results without a model wait here to travel kResultsPerMessage at a time.
  pb::ResultBatch batch;
  auto send_batch = [&] {
    if (batch.results_size() == 0) return;
    group.Send(0, Message(kResults, 0, batch.SerializeAsString()));
    batch.Clear();
  };
  clients.Fit(tasks, [&](size_t, FitResult&& r) -> std::string {
    // Rank 0 checks what it receives; this rank only forwards.
    if (failure.failed()) return "";  // rank 0 is gone: nothing more to send
    try {
      pb::ResultHeader rh;
      ToWire(r, &rh);
      rh.set_task_id(header.task_id());
      if (r.params.empty()) {
        *batch.add_results() = std::move(rh);
        if (batch.results_size() == kResultsPerMessage) send_batch();
        return "";
      }
      RankMessage out = Message(kResult, 0, rh.SerializeAsString());
      out.floats =
          std::make_shared<const FlatParams>(ModelThenAlgorithmValues(std::move(r.params), r.algorithm_values));
      group.Send(0, out);
    } catch (...) {
      failure.Record(std::current_exception());
      group.Cancel();
    }
    return "";
  });
  if (!failure.failed()) {
    try {
      send_batch();
    } catch (...) {
      failure.Record(std::current_exception());
      group.Cancel();
    }
  }
  failure.RethrowIfAny("");
}

void Serve(RankGroup& group, const LocalClientsFactory& make_clients) {
  const RankMessage first = group.Recv(0);
  if (first.kind == kAbort) throw Aborted();
  if (first.kind != kConfig) {
    throw RankError(0, "rank 0 sent a message of kind " + std::to_string(first.kind) +
                           " first, expected the run's config");
  }
  Config config;
  config.MergeTomlString(first.bytes, "rank 0's config");
  group.set_timeout(config.options().dist.timeout_s);
  const std::shared_ptr<InProcessTransport> clients = make_clients(config);
  group.Send(0, Message(kReady, 0, Fingerprint(clients->Available())));
  for (;;) {
    const RankMessage m = group.Recv(0);
    switch (m.kind) {
      case kFit:
        ServeFit(group, *clients, m);
        break;
      case kSaveStates:
        group.Send(0, Message(kStates, 0, clients->SaveState()));
        break;
      case kLoadStates:
        clients->LoadState(m.bytes);
        group.Send(0, Message(kAck));
        break;
      case kStop:
        return;
      case kAbort:
        throw Aborted();
      default:
        throw RankError(0, "rank 0 sent an unknown command " + std::to_string(m.kind));
    }
  }
}

}  // namespace

void RunWorker(RankGroup& group, const LocalClientsFactory& make_clients) {
  const std::string me = Rank(group.rank()) + ": ";
  try {
    Serve(group, make_clients);
  } catch (const Aborted& e) {
    throw Error(me + e.what());
  } catch (const RankError& e) {
    group.Cancel();
    throw Error(me + e.what());
  } catch (const std::exception& e) {
    // This rank's own failure (its data, a malformed task): tell rank 0,
    // briefly, so that its line names the cause too.
    if (!group.cancelled()) {
      group.set_timeout(std::min(group.timeout_s(), 10.0));
      try {
        group.Send(0, Message(kFailed, 0, e.what()));
      } catch (...) {
      }
    }
    if (dynamic_cast<const Error*>(&e) != nullptr) throw Error(me + e.what());
    throw;
  }
}

}  // namespace fedprof
