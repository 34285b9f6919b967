#include "fedprof/deploy/server/round.h"

#include <algorithm>
#include <set>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/text.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

Round::Round(ServiceState* state, ClientRegistry* registry, TaskStreams* streams)
    : state_(*state), registry_(*registry), streams_(*streams), timeout_s_(state->options.round_timeout_s) {}

void Round::Fit(const std::vector<ClientInstructions>& tasks, const Transport::ResultSink& sink) {
  std::vector<int> relay_of(tasks.size(), -1);
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    for (size_t i = 0; i < tasks.size(); ++i) relay_of[i] = registry_.RelayOf(tasks[i].client_id);
  }
  fit_timeout_s_ = timeout_s_.load();
  RelayModels for_relays;
  std::vector<Task> opened = Prepare(tasks, relay_of, &for_relays);
  const auto deadline = opened.empty() ? Clock::now() + Seconds(fit_timeout_s_) : opened.front().deadline;
  std::unique_lock<std::mutex> lock(state_.mutex);
  const SessionOpening session = OpenSession(tasks);
  Dispatch dispatch = Place(tasks, relay_of, std::move(opened), for_relays, session);
  lock.unlock();
  for (auto& [pull, task] : dispatch.to_clients) streams_.Send(pull, task);
  for (auto& [pull, batch] : dispatch.to_relays) streams_.Send(pull, batch);
  lock.lock();
  Judge(sink, tasks.size(), deadline, lock);
  // The round's tasks end with it; an asynchronous run's go on.
  std::set<int> training;
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second.streamed && it->second.open) {
      training.insert(it->first);
      ++it;
    } else {
      it = tasks_.erase(it);
    }
  }
  batches_.clear();
  // A task still being sent (its client reads slowly, or not at all) ends
  // with its round: it holds no round and no buffer beyond it.
  const std::vector<std::shared_ptr<Sending>> unfinished = streams_.AllSending(training);
  const std::shared_ptr<SecAggRendezvous> secure = secagg_;
  lock.unlock();
  for (const auto& sending : unfinished) sending->Cancel();
  if (secure) Aggregate(*secure, tasks.front().instructions, session.index_of, sink);
}

void Round::Launch(const std::vector<ClientInstructions>& tasks) {
  // A streamed task goes to its client directly: an asynchronous run takes
  // no relays (GrpcServerOptions::relays_refused).
  const std::vector<int> relay_of(tasks.size(), -1);
  fit_timeout_s_ = timeout_s_.load();
  RelayModels none;
  std::vector<Task> opened = Prepare(tasks, relay_of, &none);
  for (size_t i = 0; i < tasks.size(); ++i) {
    opened[i].index = static_cast<size_t>(tasks[i].client_id);
    opened[i].streamed = true;
  }
  std::unique_lock<std::mutex> lock(state_.mutex);
  Dispatch dispatch = Place(tasks, relay_of, std::move(opened), none, SessionOpening());
  lock.unlock();
  for (auto& [pull, task] : dispatch.to_clients) streams_.Send(pull, task);
}

bool Round::AwaitStreamed(const Transport::ResultSink& sink) {
  std::unique_lock<std::mutex> lock(state_.mutex);
  while (streamed_.empty()) {
    Clock::time_point due = Clock::time_point::max();
    for (const auto& [id, task] : tasks_) {
      if (task.streamed && task.open) due = std::min(due, task.deadline);
    }
    if (due == Clock::time_point::max()) return false;
    AwaitArrival(due, streamed_, lock);
  }
  Arrival a = std::move(streamed_.front());
  streamed_.pop_front();
  const auto it = tasks_.find(static_cast<int>(a.index));
  if (it != tasks_.end() && it->second.streamed && !it->second.open) tasks_.erase(it);
  lock.unlock();
  std::string why;
  try {
    why = sink(a.index, std::move(a.result));
  } catch (...) {
    Answer(a.verdict, "the server failed while judging it");
    throw;
  }
  Answer(a.verdict, why);
  return true;
}

// Each task holds its client's instructions; θ stays one shared copy,
// encoded into its chunks once for every stream that sends it (and once for
// every relay's batch).
std::vector<Task> Round::Prepare(const std::vector<ClientInstructions>& tasks,
                                 const std::vector<int>& relay_of, RelayModels* for_relays) const {
  std::map<std::pair<const FlatParams*, const FlatParams*>, std::shared_ptr<const std::vector<pb::TaskChunk>>>
      encoded;
  std::vector<Task> opened(tasks.size());
  const auto start = Clock::now();
  const auto deadline = start + Seconds(fit_timeout_s_);
  const size_t chunk_bytes = state_.options.chunk_bytes;
  for (size_t i = 0; i < tasks.size(); ++i) {
    Task& t = opened[i];
    t.index = i;
    t.instructions = std::make_shared<const FitInstructions>(tasks[i].instructions);
    t.opened = start;
    t.deadline = deadline;
    const FlatParams* global = t.instructions->global.get();
    if (relay_of[i] < 0) {
      const FlatParams* broadcast = t.instructions->algorithm_values.get();
      auto& chunks = encoded[{global, broadcast}];
      if (!chunks && broadcast == nullptr) chunks = EncodeModel<pb::TaskChunk>(*global, chunk_bytes);
      if (!chunks && broadcast != nullptr) {
        chunks = EncodeModel<pb::TaskChunk>(ModelThenAlgorithmValues(*global, *broadcast), chunk_bytes);
      }
      t.chunks = chunks;
    } else if (!(*for_relays)[global]) {
      (*for_relays)[global] = EncodeModel<pb::RelayTaskChunk>(*global, chunk_bytes);
    }
  }
  return opened;
}

Round::SessionOpening Round::OpenSession(const std::vector<ClientInstructions>& tasks) {
  SessionOpening out;
  const GrpcServerOptions& o = state_.options;
  if (!o.secure_aggregation) return out;
  std::map<int64_t, int64_t> task_of;
  std::map<int64_t, secagg::Bytes> verify_keys;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].instructions.train.epochs == 0) continue;
    const int id = tasks[i].client_id;
    task_of[id] = next_task_id_ + static_cast<int64_t>(i);
    out.index_of[id] = i;
    const std::string& key = registry_.VerifyKeyOf(id);
    verify_keys[id] = secagg::Bytes(key.begin(), key.end());
  }
  try {
    if (task_of.empty()) throw Error("none");
    secagg::SessionConfig config = SessionConfigFor(
        *o.secure_aggregation, run_id_, tasks.front().instructions.round,
        SessionLength(tasks.front().instructions, static_cast<size_t>(o.num_params)), std::move(verify_keys),
        SessionWordBits(tasks.front().instructions));
    out.setup = std::make_shared<const pb::SecAggSetup>(
        SetupToWire(config, fit_timeout_s_ + o.secagg_phase_timeout_s));
    secagg_ = std::make_shared<SecAggRendezvous>(std::move(config), std::move(task_of),
                                                 o.secagg_phase_timeout_s, &state_.refusals);
  } catch (const Error& e) {
    out.why_none = e.what();
  }
  return out;
}

Round::Dispatch Round::Place(const std::vector<ClientInstructions>& tasks, const std::vector<int>& relay_of,
                             std::vector<Task> opened, const RelayModels& for_relays,
                             const SessionOpening& session) {
  Dispatch out;
  // A relay's clients' tasks go to it as one batch per model.
  std::map<std::pair<int, const FlatParams*>, int64_t> batch_of;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const int id = tasks[i].client_id;
    if (const Task* busy = OpenTask(id); busy && busy->streamed) {
      // An asynchronous run's client trains one task at a time.
      Arrival a;
      a.index = opened[i].index;
      a.streamed = opened[i].streamed;
      a.result = Failed(id, "it is training task " + std::to_string(busy->id), /*timed_out=*/false);
      Arrive(std::move(a));
      continue;
    }
    Task& t = tasks_[id];
    t = std::move(opened[i]);
    t.id = next_task_id_ + static_cast<int64_t>(i);
    if (session.index_of.count(id) != 0) {
      if (!session.setup) {
        // Its model would reach the server as it is.
        t.open = false;
        Arrival a;
        a.index = t.index;
        a.result =
            Failed(id,
                   "no secure aggregation session for this round's " +
                       std::to_string(session.index_of.size()) + " training tasks: " + session.why_none,
                   /*timed_out=*/false);
        arrived_.push_back(std::move(a));
        continue;
      }
      t.secagg = session.setup;
    }
    if (relay_of[i] >= 0) {
      Batched(id, relay_of[i], for_relays, &batch_of, &t);
    } else if (streams_.Parked(id)) {
      out.to_clients.emplace_back(streams_.Unpark(id), t);
    }
  }
  next_task_id_ += static_cast<int64_t>(tasks.size());
  for (auto& [b, batch] : batches_) {
    if (!streams_.RelayParked(batch.relay)) continue;
    batch.sent = true;
    out.to_relays.emplace_back(streams_.UnparkRelay(batch.relay), batch);
  }
  return out;
}

void Round::Batched(int id, int r, const RelayModels& for_relays,
                    std::map<std::pair<int, const FlatParams*>, int64_t>* batch_of, Task* t) {
  const FlatParams* global = t->instructions->global.get();
  int64_t& b = (*batch_of)[{r, global}];
  if (b == 0) {
    b = next_batch_id_++;
    Batch& batch = batches_[b];
    batch.relay = r;
    batch.chunks = for_relays.at(global);
    pb::RelayBatchHeader* h = batch.header.mutable_header();
    h->set_batch_id(b);
    h->set_deadline_s(fit_timeout_s_);
    h->set_num_params(static_cast<int64_t>(global->size()));
  }
  t->batch = b;
  pb::RelayTask* rt = batches_[b].header.mutable_header()->add_tasks();
  rt->set_client_id(id);
  ToWire(*t->instructions, t->id, static_cast<int64_t>(t->instructions->global->size()),
         rt->mutable_header());
}

void Round::Judge(const Transport::ResultSink& sink, size_t tasks, Clock::time_point deadline,
                  std::unique_lock<std::mutex>& lock) {
  size_t remaining = tasks;
  while (remaining > 0 || WaitingForSums()) {
    JudgeArrivals(sink, &remaining, lock);
    if (remaining == 0 && !WaitingForSums()) break;
    AwaitArrival(deadline, arrived_, lock);
  }
}

void Round::AwaitArrival(Clock::time_point deadline, const std::deque<Arrival>& queue,
                         std::unique_lock<std::mutex>& lock) {
  const auto now = Clock::now();
  const std::vector<std::shared_ptr<Sending>> stalled = CloseLeavers(now);
  if (!stalled.empty()) {
    lock.unlock();
    for (const auto& stream : stalled) stream->Cancel();
    lock.lock();
  }
  QueueLostSums(now, deadline);
  if (queue.empty()) {
    lock.unlock();
    state_.Tidy();
    lock.lock();
    if (queue.empty()) {
      state_.arrive_cv.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(200)));
    }
  }
}

void Round::JudgeArrivals(const Transport::ResultSink& sink, size_t* remaining,
                          std::unique_lock<std::mutex>& lock) {
  while (!arrived_.empty()) {
    Arrival a = std::move(arrived_.front());
    arrived_.pop_front();
    lock.unlock();
    std::string why;
    const int client = a.result.client_id;
    try {
      why = a.is_sum ? sink.Sum(a.indices, a.sum.get(), a.lost) : sink(a.index, std::move(a.result));
    } catch (...) {
      Answer(a.verdict, "the server failed while judging it");
      throw;
    }
    lock.lock();
    if (a.is_sum) {
      batches_.at(a.batch).sum_in = true;
    } else {
      --*remaining;
      // The relay adds the model of an accepted result to its sum; the
      // session takes a directly sent one's (before the client hears the
      // verdict that lets it join).
      if (a.summed && why.empty() && a.batch != 0) batches_.at(a.batch).awaiting.push_back(a.index);
      if (a.summed && why.empty() && a.batch == 0 && secagg_) secagg_->Admit(client);
    }
    lock.unlock();
    // The client (or relay) that sent it is told the round loop's own verdict.
    Answer(a.verdict, why);
    lock.lock();
  }
}

std::vector<std::shared_ptr<Sending>> Round::CloseLeavers(Clock::time_point now) {
  const GrpcServerOptions& o = state_.options;
  std::vector<std::shared_ptr<Sending>> stalled;
  for (auto& [id, task] : tasks_) {
    if (!task.open) continue;
    std::string why;
    const std::shared_ptr<Sending> sending = streams_.SendingTo(id);
    if (!registry_.Alive(id, now)) {
      why = "sent nothing for " + std::to_string(o.heartbeat_timeout_s) +
            " s (deploy.heartbeat_timeout_s): left the round";
    } else if (sending && sending->StalledSince(now - Seconds(o.heartbeat_timeout_s))) {
      // A client that takes none of its task is as gone as a silent one
      // (a chunk, deploy.chunk_kb, must cross its link within the timeout).
      why = "took none of its task for " + std::to_string(o.heartbeat_timeout_s) +
            " s (deploy.heartbeat_timeout_s): left the round";
      stalled.push_back(sending);
    } else if (now >= task.deadline) {
      const double timeout_s = std::chrono::duration<double>(task.deadline - task.opened).count();
      why = "no result within " + std::to_string(timeout_s) + " s (deploy.round_timeout_s)";
    }
    if (why.empty()) continue;
    task.open = false;
    Arrival a;
    a.index = task.index;
    a.streamed = task.streamed;
    a.result = Failed(id, why, /*timed_out=*/true);
    a.result.cost.time_s = Since(task.opened);
    (a.streamed ? streamed_ : arrived_).push_back(std::move(a));
  }
  return stalled;
}

void Round::QueueLostSums(Clock::time_point now, Clock::time_point deadline) {
  for (auto& [b, batch] : batches_) {
    if (batch.awaiting.empty() || batch.sum_in || batch.sum_queued) continue;
    if (registry_.RelayAlive(batch.relay, now) && now < deadline) continue;
    batch.sum_queued = true;
    Arrival a;
    a.is_sum = true;
    a.batch = b;
    a.indices = batch.awaiting;
    arrived_.push_back(std::move(a));
  }
}

bool Round::WaitingForSums() const {
  for (const auto& [b, batch] : batches_) {
    if (!batch.awaiting.empty() && !batch.sum_in) return true;
  }
  return false;
}

void Round::Aggregate(SecAggRendezvous& session, const FitInstructions& task,
                      const std::map<int64_t, size_t>& index_of, const Transport::ResultSink& sink) {
  const int64_t round = task.round;
  const SecAggOutcome out = session.Run([this](int64_t id) {
    std::lock_guard<std::mutex> lock(state_.mutex);
    return registry_.Alive(static_cast<int>(id), Clock::now());
  });
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    secagg_.reset();
  }
  if (out.clients.empty()) return;
  HandOverSession(out, index_of, task, sink);
  if (state_.monitor) state_.monitor->AddBytes(out.cost.server_bytes_received, 0);
  if (state_.options.secure_aggregation->progress) {
    LogProgress(DescribeSession(round, state_.options.secure_aggregation->protocol, out.cost));
  }
}

Task* Round::OpenTask(int id) {
  const auto it = tasks_.find(id);
  return it == tasks_.end() || !it->second.open ? nullptr : &it->second;
}

const Task* Round::AnyTask(int id) const {
  const auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

Batch* Round::TakeUnsentBatch(int r) {
  for (auto& [b, batch] : batches_) {
    if (batch.relay != r || batch.sent) continue;
    batch.sent = true;
    return &batch;
  }
  return nullptr;
}

Batch* Round::FindBatch(int64_t b) {
  const auto it = batches_.find(b);
  return it == batches_.end() ? nullptr : &it->second;
}

void Round::Arrive(Arrival a) {
  (a.streamed ? streamed_ : arrived_).push_back(std::move(a));
  state_.arrive_cv.notify_all();
}

bool Round::Close(int id, int64_t task_id, Arrival a) {
  Task* task = OpenTask(id);
  if (state_.stopping || task == nullptr || task->id != task_id) return false;
  task->open = false;
  a.streamed = task->streamed;
  Arrive(std::move(a));
  return true;
}

void Round::CloseAsRefused(int id, const std::string& why) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  Task* task = OpenTask(id);
  if (task == nullptr) return;
  task->open = false;
  Arrival a;
  a.index = task->index;
  a.streamed = task->streamed;
  a.result = Failed(id, "refused on arrival: " + why, false);
  Arrive(std::move(a));
}

void Round::Answer(const std::shared_ptr<Verdict>& verdict, const std::string& why) {
  if (!verdict) return;
  const void* call = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    std::swap(call, verdict->call);
  }
  if (!call) return;  // its client went away
  verdict->reply->set_accepted(why.empty());
  verdict->reply->set_reason(Printable(why, kMaxErrorLength));
  verdict->finish();
}

void Round::CancelVerdict(const void* call, const std::function<void()>& finish) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    bool waiting = false;
    for (std::deque<Arrival>* queue : {&arrived_, &streamed_}) {
      for (Arrival& a : *queue) {
        if (a.verdict && a.verdict->call == call) {
          a.verdict->call = nullptr;
          waiting = true;
        }
      }
    }
    if (!waiting) return;
  }
  finish();
}

std::deque<Arrival> Round::Stop() {
  std::deque<Arrival> unjudged;
  unjudged.swap(arrived_);
  for (Arrival& a : streamed_) unjudged.push_back(std::move(a));
  streamed_.clear();
  secagg_.reset();  // its held replies are answered
  return unjudged;
}

}  // namespace fedprof::deploy
