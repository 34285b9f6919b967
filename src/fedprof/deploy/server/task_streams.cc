#include "fedprof/deploy/server/task_streams.h"

#include <algorithm>

#include "fedprof/core/run_observer.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

void Sending::Cancel() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (context_) context_->TryCancel();
}

void Sending::Done() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  context_ = nullptr;
}

template <typename Chunk>
void ModelStream<Chunk>::SendStatus(pb::Status status) {
  status_.set_status(status);
  this->StartWriteAndFinish(&status_, grpc::WriteOptions(), grpc::Status::OK);
}

template <typename Chunk>
void ModelStream<Chunk>::Send(Chunk header, std::shared_ptr<const std::vector<Chunk>> chunks) {
  sending->Progress();
  status_.set_status(pb::TASK);
  header_ = std::move(header);
  chunks_ = std::move(chunks);
  next_ = 0;
  WriteNext();
}

template <typename Chunk>
void ModelStream<Chunk>::OnWriteDone(bool ok) {
  if (!ok) {  // the client went away
    this->Finish(grpc::Status::OK);
    return;
  }
  sending->Progress();
  if (next_ > 2) sent_bytes_ += (*chunks_)[next_ - 3].params().size();
  WriteNext();
}

template <typename Chunk>
void ModelStream<Chunk>::OnCancel() {
  streams_->CancelPull(this);
}

template <typename Chunk>
void ModelStream<Chunk>::OnDone() {
  streams_->SendingDone(this);
  delete this;
}

template <typename Chunk>
void ModelStream<Chunk>::WriteNext() {
  const size_t total = 2 + chunks_->size();
  const size_t at = next_++;
  const Chunk* message = at == 0 ? &status_ : at == 1 ? &header_ : &(*chunks_)[at - 2];
  if (at + 1 < total) {
    this->StartWrite(message);
    return;
  }
  if (at >= 2) sent_bytes_ += message->params().size();
  if (RunObserver* monitor = streams_->state().monitor) {
    monitor->AddBytes(0, static_cast<int64_t>(header_.ByteSizeLong() + sent_bytes_));
  }
  this->StartWriteAndFinish(message, grpc::WriteOptions(), grpc::Status::OK);
}

template class ModelStream<pb::TaskChunk>;
template class ModelStream<pb::RelayTaskChunk>;

template <typename Chunk>
std::shared_ptr<const std::vector<Chunk>> EncodeModel(const FlatParams& global, size_t chunk_bytes) {
  auto chunks = std::make_shared<std::vector<Chunk>>();
  const size_t per_chunk = std::max<size_t>(1, chunk_bytes / sizeof(float));
  for (size_t at = 0; at < global.size(); at += per_chunk) {
    chunks->emplace_back();
    PutFloats(global, at, std::min(per_chunk, global.size() - at), chunks->back().mutable_params());
  }
  return chunks;
}

template std::shared_ptr<const std::vector<pb::TaskChunk>> EncodeModel(const FlatParams&, size_t);
template std::shared_ptr<const std::vector<pb::RelayTaskChunk>> EncodeModel(const FlatParams&, size_t);

TaskStreams::TaskStreams(ServiceState* state, ClientRegistry* registry)
    : state_(*state), registry_(*registry), waker_([this] { WakeExpired(); }) {}

TaskStreams::~TaskStreams() {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    state_.stopping = true;
  }
  StopWaker();
}

void TaskStreams::StopWaker() {
  waker_cv_.notify_all();
  if (waker_.joinable()) waker_.join();
}

TaskStream* TaskStreams::Park(int id, TaskStream* pull, Clock::time_point until) {
  TaskStream* earlier = Parked(id) ? Unpark(id) : nullptr;
  pull->owner = id;
  parked_[id] = {pull, until};
  registry_.SetWaiting(id, true);
  Expires(until, id);
  return earlier;
}

BatchStream* TaskStreams::ParkRelay(int r, BatchStream* pull, Clock::time_point until) {
  BatchStream* earlier = RelayParked(r) ? UnparkRelay(r) : nullptr;
  pull->owner = r;
  relay_parked_[r] = {pull, until};
  registry_.SetRelayWaiting(r, true);
  Expires(until, -1 - r);
  return earlier;
}

TaskStream* TaskStreams::Unpark(int id) {
  const auto it = parked_.find(id);
  TaskStream* pull = it->second.pull;
  parked_.erase(it);
  registry_.SetWaiting(id, false);
  registry_.Heard(id, Clock::now());
  return pull;
}

BatchStream* TaskStreams::UnparkRelay(int r) {
  const auto it = relay_parked_.find(r);
  BatchStream* pull = it->second.pull;
  relay_parked_.erase(it);
  registry_.SetRelayWaiting(r, false);
  registry_.HeardRelay(r, Clock::now());
  return pull;
}

void TaskStreams::UnparkAll(std::vector<TaskStream*>* clients, std::vector<BatchStream*>* relays) {
  while (!parked_.empty()) clients->push_back(Unpark(parked_.begin()->first));
  while (!relay_parked_.empty()) relays->push_back(UnparkRelay(relay_parked_.begin()->first));
}

void TaskStreams::Send(TaskStream* pull, const Task& task) {
  pb::TaskChunk header;
  const FitInstructions& ins = *task.instructions;
  ToWire(ins, task.id, static_cast<int64_t>(ins.global->size()), header.mutable_header());
  if (ins.algorithm_values) {
    header.mutable_header()->set_num_algorithm_values(static_cast<int64_t>(ins.algorithm_values->size()));
  }
  if (task.secagg) *header.mutable_header()->mutable_secagg() = *task.secagg;
  SendOn(pull, std::move(header), task.chunks);
}

void TaskStreams::Send(BatchStream* pull, const Batch& batch) { SendOn(pull, batch.header, batch.chunks); }

template <typename Chunk>
void TaskStreams::SendOn(ModelStream<Chunk>* pull, Chunk header,
                         std::shared_ptr<const std::vector<Chunk>> chunks) {
  std::shared_ptr<Sending> earlier;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    auto& slot = sending_[SendingKey(pull)];
    if (slot) earlier = slot;
    slot = pull->sending;
  }
  if (earlier) earlier->Cancel();
  pull->Send(std::move(header), std::move(chunks));
}

std::shared_ptr<Sending> TaskStreams::SendingTo(int id) const {
  const auto it = sending_.find(id);
  return it == sending_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Sending>> TaskStreams::AllSending(const std::set<int>& except) const {
  std::vector<std::shared_ptr<Sending>> out;
  for (const auto& [key, sending] : sending_) {
    if (except.count(key) == 0) out.push_back(sending);  // relays' keys are negative
  }
  return out;
}

template <typename Chunk>
void TaskStreams::SendingDone(ModelStream<Chunk>* pull) {
  pull->sending->Done();
  std::lock_guard<std::mutex> lock(state_.mutex);
  const auto it = sending_.find(SendingKey(pull));
  if (it != sending_.end() && it->second == pull->sending) sending_.erase(it);
}

template void TaskStreams::SendingDone(TaskStream*);
template void TaskStreams::SendingDone(BatchStream*);

// A parked request whose caller went away is answered (gRPC needs every
// call finished); one already taken out is answered by whoever took it.
void TaskStreams::CancelPull(TaskStream* pull) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    const auto it = parked_.find(pull->owner);
    if (it == parked_.end() || it->second.pull != pull) return;
    Unpark(pull->owner);
  }
  pull->Finish(grpc::Status::CANCELLED);
}

void TaskStreams::CancelPull(BatchStream* pull) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    const auto it = relay_parked_.find(pull->owner);
    if (it == relay_parked_.end() || it->second.pull != pull) return;
    UnparkRelay(pull->owner);
  }
  pull->Finish(grpc::Status::CANCELLED);
}

void TaskStreams::Expires(Clock::time_point until, int owner) {
  const bool sooner = expiries_.empty() || until < expiries_.begin()->first;
  expiries_.emplace(until, owner);
  if (sooner) waker_cv_.notify_all();
}

// It sleeps until the earliest wait ends (and sweeps at most every 100 ms),
// taking the ended waits in time order, so that an idle fleet costs no scan
// of every parked request.
void TaskStreams::WakeExpired() {
  std::unique_lock<std::mutex> lock(state_.mutex);
  auto last_sweep = Clock::now();
  while (!state_.stopping) {
    const auto next =
        expiries_.empty() ? Clock::now() + std::chrono::seconds(1) : expiries_.begin()->first;
    waker_cv_.wait_until(lock, std::max(next, last_sweep + std::chrono::milliseconds(100)));
    if (state_.stopping) break;
    const auto now = Clock::now();
    last_sweep = now;
    const pb::Status status = state_.Next();
    std::vector<TaskStream*> ended;
    std::vector<BatchStream*> relays_ended;
    TakeExpired(now, &ended, &relays_ended);
    if (ended.empty() && relays_ended.empty()) continue;
    lock.unlock();
    for (TaskStream* pull : ended) pull->SendStatus(status);
    for (BatchStream* pull : relays_ended) pull->SendStatus(status);
    lock.lock();
  }
}

void TaskStreams::TakeExpired(Clock::time_point now, std::vector<TaskStream*>* ended,
                              std::vector<BatchStream*>* relays_ended) {
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    const auto [until, owner] = *expiries_.begin();
    expiries_.erase(expiries_.begin());
    // Skip a wait answered before its end (its request is no longer
    // parked, or another parked since).
    if (owner >= 0) {
      const auto it = parked_.find(owner);
      if (it != parked_.end() && it->second.until == until) ended->push_back(Unpark(owner));
      continue;
    }
    const int r = -1 - owner;
    const auto it = relay_parked_.find(r);
    if (it == relay_parked_.end() || it->second.until != until) continue;
    relays_ended->push_back(UnparkRelay(r));
    if (state_.done) registry_.TellRelayDone(r);
  }
}

}  // namespace fedprof::deploy
