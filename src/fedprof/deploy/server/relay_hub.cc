#include "fedprof/deploy/server/relay_hub.h"

#include <algorithm>
#include <set>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

namespace {

// The size of a partial sum of a model of `num_params` values.
size_t SumBytes(int64_t num_params) {
  ModelSum sum;
  sum.Reset(static_cast<size_t>(std::max<int64_t>(0, num_params)));
  return sum.Serialize().size();
}

grpc::Status CheckWait(double wait_s) {
  if (wait_s >= 0 && wait_s <= 3600) return grpc::Status::OK;  // NaN fails too
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "wait_s " + FormatDouble(wait_s) + " is not in [0, 3600]");
}

}  // namespace

// One RelaySum call: its header, checked, then the sum's bytes, at most the
// size a sum of this model has.
class SumStream final : public grpc::ServerReadReactor<pb::RelaySumChunk> {
 public:
  SumStream(RelayHub* hub, grpc::CallbackServerContext* context, pb::PushReply* reply)
      : hub_(hub), context_(context), reply_(reply) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!have_header_) {
      have_header_ = true;
      const grpc::Status status =
          ok && chunk_.has_header()
              ? hub_->BeginSum(*context_, chunk_.header(), &state_)
              : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a partial sum without a header");
      if (!status.ok()) {
        Finish(status);
        return;
      }
    } else if (ok) {
      if (!chunk_.has_sum() || state_.bytes.size() + chunk_.sum().size() > state_.expected) {
        Finish(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            "a partial sum beyond the " + std::to_string(state_.expected) + " bytes it announced"));
        return;
      }
      state_.bytes += chunk_.sum();
    }
    if (ok) {
      StartRead(&chunk_);
      return;
    }
    hub_->DeliverSum(std::move(state_), {this, reply_, [this] { Finish(grpc::Status::OK); }});
  }

  void OnCancel() override {
    hub_->round().CancelVerdict(this, [this] { Finish(grpc::Status::CANCELLED); });
  }
  void OnDone() override { delete this; }

 private:
  RelayHub* const hub_;
  grpc::CallbackServerContext* const context_;
  pb::PushReply* const reply_;
  pb::RelaySumChunk chunk_;
  bool have_header_ = false;
  RelayHub::SumState state_;
};

RelayHub::RelayHub(ServiceState* state, ClientRegistry* registry, TaskStreams* streams, Round* round)
    : state_(*state),
      registry_(*registry),
      streams_(*streams),
      round_(*round),
      sum_bytes_(SumBytes(state->options.num_params)) {}

grpc::Status RelayHub::Sync(const grpc::CallbackServerContext& context, const pb::RelaySyncRequest& request,
                            pb::RelaySyncReply* reply) {
  const GrpcServerOptions& o = state_.options;
  const size_t limit = 1024 + 40 * static_cast<size_t>(o.num_clients);
  grpc::Status refused = CheckSize(request, limit, "a relay's sync");
  int r = -1;
  if (refused.ok()) {
    refused = AuthenticateRelay(context, state_.tls(), request.protocol_version(), request.relay_id(), &r);
  }
  if (refused.ok() && !request.session().empty()) refused = CheckSession(request.session());
  if (!refused.ok()) return refused;
  if (!o.relays_refused.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this run takes no relays: " + o.relays_refused);
  }
  try {
    CheckRelayedIds(request, o.num_clients);
  } catch (const Error& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  reply->set_protocol_version(kProtocolVersion);
  std::lock_guard<std::mutex> lock(state_.mutex);
  registry_.SyncRelay(r, request, Clock::now(), reply);
  if (reply->status() == pb::UNKNOWN_SESSION) return grpc::Status::OK;
  registry_.FillRegisterReply("", round_.run_id(), reply->mutable_setup());
  reply->set_num_clients(o.num_clients);
  reply->set_max_samples(o.max_samples);
  reply->set_heartbeat_timeout_s(o.heartbeat_timeout_s);
  state_.arrive_cv.notify_all();
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<pb::RelayTaskChunk>* RelayHub::Pull(grpc::CallbackServerContext* context,
                                                             const pb::RelayPullRequest& request) {
  auto* pull = new BatchStream(&streams_, context);
  int r = -1;
  grpc::Status refused = CheckSize(request, kMaxSmallRequestBytes, "a relay's batch request");
  if (refused.ok()) {
    refused = AuthenticateRelay(*context, state_.tls(), request.protocol_version(), request.relay_id(), &r);
  }
  if (refused.ok()) refused = CheckSession(request.session());
  if (refused.ok()) refused = CheckWait(request.wait_s());
  if (!refused.ok()) {
    pull->Finish(refused);
    return pull;
  }
  std::unique_lock<std::mutex> lock(state_.mutex);
  const pb::Status status = registry_.TouchRelay(r, request.session());
  if (status == pb::DONE) registry_.TellRelayDone(r);
  if (status == pb::WAIT && !state_.stopping) {
    pull->owner = r;
    // A batch goes to its relay once: one whose stream broke is lost, as its
    // relay would be.
    if (const Batch* batch = round_.TakeUnsentBatch(r)) {
      const Batch copy = *batch;  // the round may end (and drop it) while it is sent
      lock.unlock();
      streams_.Send(pull, copy);
      return pull;
    }
    if (request.wait_s() > 0) {
      const auto until = Clock::now() + Seconds(std::min(request.wait_s(), 30.0));
      BatchStream* earlier = streams_.ParkRelay(r, pull, until);
      lock.unlock();
      if (earlier) earlier->SendStatus(pb::WAIT);
      return pull;
    }
  }
  lock.unlock();
  pull->SendStatus(status);
  return pull;
}

grpc::Status RelayHub::TakeResult(const grpc::CallbackServerContext& context,
                                  const pb::RelayResultRequest& request, pb::PushReply* reply,
                                  grpc::ServerUnaryReactor* call, bool* judged) {
  *judged = false;
  grpc::Status refused = CheckSize(request, kHeaderAllowance, "a relayed result");
  int r = -1;
  if (refused.ok()) {
    refused = AuthenticateRelay(context, state_.tls(), request.protocol_version(), request.relay_id(), &r);
  }
  if (refused.ok()) refused = CheckSession(request.session());
  if (!refused.ok()) return refused;
  const pb::ResultHeader& header = request.result();
  const int id = header.client_id();
  if (id < 0 || id >= state_.options.num_clients) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a result of client " + std::to_string(id) + ", not one of 0.." +
                            std::to_string(state_.options.num_clients - 1));
  }
  FitResult result;
  std::string why;
  try {
    result = FromWire(header);
  } catch (const Error& e) {
    why = e.what();
  }
  Task task;
  int64_t registered = 0;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    const std::string no_task = FindTask(r, request, &task, &registered);
    if (!no_task.empty()) {
      reply->set_reason(no_task);
      return grpc::Status::OK;
    }
  }
  if (why.empty()) why = CheckRelayedResult(header, registered);
  const double elapsed = Since(task.opened);
  if (!why.empty()) {
    state_.refusals.Refuse("relay " + std::to_string(r), "malformed results",
                           "RelayResult of client " + std::to_string(id) + ": " + Printable(why, 400));
    result = Failed(id, "refused on arrival: " + why, /*timed_out=*/false);
  } else {
    result = Judged(id, header, std::move(result), task, registered, elapsed);
  }
  Arrival a;
  a.index = task.index;
  a.batch = task.batch;
  a.summed = result.summed;
  const bool ok = result.ok;
  a.result = std::move(result);
  a.verdict = std::make_shared<Verdict>(Verdict{call, reply, [call] { call->Finish(grpc::Status::OK); }});
  std::lock_guard<std::mutex> lock(state_.mutex);
  if (!round_.Close(id, task.id, std::move(a))) {
    reply->set_reason("the round ended while the result arrived");
    return grpc::Status::OK;
  }
  if (ok) registry_.CountRound(id, elapsed);
  *judged = true;
  return grpc::Status::OK;
}

std::string RelayHub::FindTask(int r, const pb::RelayResultRequest& request, Task* task,
                               int64_t* registered) {
  if (registry_.TouchRelay(r, request.session()) == pb::UNKNOWN_SESSION) return "unknown session: sync again";
  const int id = request.result().client_id();
  const Task* open = round_.OpenTask(id);
  if (registry_.RelayOf(id) != r || open == nullptr || open->batch != request.batch_id() ||
      open->id != request.result().task_id()) {
    const std::string stale = "task " + std::to_string(request.result().task_id()) + " of client " +
                              std::to_string(id) + " is not open in batch " +
                              std::to_string(request.batch_id()) + " of this relay";
    state_.refusals.Refuse("relay " + std::to_string(r), "stale results", "RelayResult: " + stale);
    return stale;
  }
  *task = *open;
  *registered = registry_.SamplesOf(id);
  return "";
}

std::string RelayHub::CheckRelayedResult(const pb::ResultHeader& header, int64_t registered) {
  if (header.num_samples() != registered) {
    return "claims " + std::to_string(header.num_samples()) + " samples; it registered " +
           std::to_string(registered) + ", its aggregation weight for the run";
  }
  if (header.num_params() != 0) {
    return "a relayed result brings " + std::to_string(header.num_params()) +
           " model values; its model belongs in its relay's sum";
  }
  return "";
}

FitResult RelayHub::Judged(int id, const pb::ResultHeader& header, FitResult result, const Task& task,
                           int64_t registered, double elapsed) {
  if (!result.ok) {
    FitResult failed =
        Failed(id, result.error.empty() ? "failed at its relay" : result.error, result.timed_out);
    failed.cost.time_s = elapsed;
    return failed;
  }
  result.client_id = id;  // whatever it claimed, this is who it is
  result.num_samples = registered;
  result.cost = ResultCost();
  result.cost.time_s = elapsed;
  result.cost.profiling_time_s = std::clamp(header.profiling_s(), 0.0, elapsed);
  result.summed = task.instructions->train.epochs > 0;
  return result;
}

grpc::ServerReadReactor<pb::RelaySumChunk>* RelayHub::StartSum(grpc::CallbackServerContext* context,
                                                               pb::PushReply* reply) {
  reply->set_protocol_version(kProtocolVersion);
  return new SumStream(this, context, reply);
}

grpc::Status RelayHub::BeginSum(const grpc::CallbackServerContext& context, const pb::RelaySumHeader& header,
                                SumState* state) {
  int r = -1;
  grpc::Status refused =
      CheckSize(header, 64 + 8 * static_cast<size_t>(state_.options.num_clients), "a sum header");
  if (refused.ok()) {
    refused = AuthenticateRelay(context, state_.tls(), header.protocol_version(), header.relay_id(), &r);
  }
  if (refused.ok()) refused = CheckSession(header.session());
  if (!refused.ok()) return refused;
  std::lock_guard<std::mutex> lock(state_.mutex);
  if (registry_.TouchRelay(r, header.session()) == pb::UNKNOWN_SESSION) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "unknown session: sync again");
  }
  return CheckSumHeader(r, header, state);
}

grpc::Status RelayHub::CheckSumHeader(int r, const pb::RelaySumHeader& header, SumState* state) {
  const Batch* batch = round_.FindBatch(header.batch_id());
  if (batch == nullptr || batch->relay != r || batch->sum_in || batch->sum_queued) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "batch " + std::to_string(header.batch_id()) + " awaits no sum of this relay");
  }
  std::set<int> named;
  for (int id : header.client_ids()) {
    const Task* t = round_.AnyTask(id);
    if (!named.insert(id).second || t == nullptr || t->batch != header.batch_id()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the sum names client " + std::to_string(id) +
                                                                  ", twice or without a task in its batch");
    }
    state->indices.push_back(t->index);
  }
  state->relay = r;
  state->batch = header.batch_id();
  state->expected = sum_bytes_;
  if (header.bytes() != static_cast<int64_t>(sum_bytes_)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a sum of " + std::to_string(header.bytes()) + " bytes; one of this model has " +
                            std::to_string(sum_bytes_));
  }
  state->bytes.reserve(sum_bytes_);
  return grpc::Status::OK;
}

void RelayHub::DeliverSum(SumState state, Verdict verdict) {
  Arrival a;
  a.is_sum = true;
  a.batch = state.batch;
  a.indices = std::move(state.indices);
  std::string why;
  if (state.bytes.size() != state.expected) {
    why = "the sum ended after " + std::to_string(state.bytes.size()) + " of its " +
          std::to_string(state.expected) + " bytes";
  } else {
    try {
      a.sum = std::make_shared<const ModelSum>(
          ModelSum::Parse(state.bytes, "relay " + std::to_string(state.relay) + "'s sum"));
    } catch (const Error& e) {
      why = e.what();
    }
  }
  std::lock_guard<std::mutex> lock(state_.mutex);
  Batch* batch = round_.FindBatch(state.batch);
  if (state_.stopping || batch == nullptr || batch->sum_in || batch->sum_queued) {
    verdict.reply->set_reason("the round ended while the sum arrived");
    verdict.finish();
    return;
  }
  batch->sum_queued = true;  // it came (or is refused): no other will be taken
  if (!why.empty()) {
    // Refused whole: its results' models are lost to the round, for this reason.
    state_.refusals.Refuse("relay " + std::to_string(state.relay), "malformed sums",
                           "RelaySum: " + Printable(why, 400));
    verdict.reply->set_reason(Printable(why, kMaxErrorLength));
    verdict.finish();
    a.indices = batch->awaiting;
    a.sum.reset();
    a.lost = "its relay's sum was refused: " + Printable(why, 400);
  } else {
    a.verdict = std::make_shared<Verdict>(std::move(verdict));
  }
  round_.Arrive(std::move(a));
}

}  // namespace fedprof::deploy
