#include "fedprof/deploy/server/result_intake.h"

#include <algorithm>

#include "fedprof/algorithms/algorithm.h"
#include "fedprof/core/error.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

// One PushResult call: its header, then the model chunks, one read at a
// time, each checked.
class ResultStream final : public grpc::ServerReadReactor<pb::ResultChunk> {
 public:
  ResultStream(ResultIntake* intake, grpc::CallbackServerContext* context, pb::PushReply* reply)
      : intake_(intake), context_(context), reply_(reply) {
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (!have_header_) {
      have_header_ = true;
      if (!ok || !chunk_.has_header()) {
        Finish(intake_->RefuseHeaderless(*context_));
        return;
      }
      // A copy: reading the model chunks into `chunk_` replaces its header
      // (a oneof).
      header_ = chunk_.header();
      bool read_on = false;
      const grpc::Status status = intake_->Begin(*context_, header_, reply_, &state_, &read_on);
      if (!read_on) {
        Finish(status);
        return;
      }
    } else if (ok) {
      intake_->AddChunk(chunk_, &state_);
    }
    if (ok && state_.why.empty()) {
      StartRead(&chunk_);
      return;
    }
    // Every chunk is in, or one was refused: the round loop judges it.
    if (!intake_->Deliver(header_, std::move(state_), {this, reply_, [this] { Finish(grpc::Status::OK); }})) {
      Finish(grpc::Status::OK);
    }
  }

  // A push whose client went away while its result waited for a verdict is
  // finished now; the round loop still judges the result.
  void OnCancel() override {
    intake_->round().CancelVerdict(this, [this] { Finish(grpc::Status::CANCELLED); });
  }
  void OnDone() override { delete this; }

 private:
  ResultIntake* const intake_;
  grpc::CallbackServerContext* const context_;
  pb::PushReply* const reply_;
  pb::ResultChunk chunk_;
  pb::ResultHeader header_;
  bool have_header_ = false;
  ResultIntake::PushState state_;
};

grpc::ServerReadReactor<pb::ResultChunk>* ResultIntake::Start(grpc::CallbackServerContext* context,
                                                               pb::PushReply* reply) {
  reply->set_protocol_version(kProtocolVersion);
  return new ResultStream(this, context, reply);
}

grpc::Status ResultIntake::RefuseHeaderless(const grpc::CallbackServerContext& context) {
  const std::string why = "a result without a readable header (empty, over the " +
                          std::to_string(state_.MessageLimit()) + "-byte message limit, or malformed)";
  // Under TLS the certificate says who sent it: its round counts the refusal.
  const int certified = state_.tls() ? CertifiedClient(context).id : -1;
  if (certified >= 0 && certified < state_.options.num_clients) round_.CloseAsRefused(certified, why);
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

grpc::Status ResultIntake::Begin(const grpc::CallbackServerContext& context, const pb::ResultHeader& header,
                                 pb::PushReply* reply, PushState* state, bool* read_on) {
  *read_on = false;
  int id = -1;
  grpc::Status refused = Authenticate(context, state_.tls(), state_.options.num_clients,
                                      header.protocol_version(), header.client_id(), &id, &state_.access);
  if (refused.ok()) refused = CheckSession(header.session());
  if (!refused.ok()) return refused;
  // The header's own checks come before anything is looked up for it, so a
  // malformed one is refused whatever task it names.
  try {
    state->result = FromWire(header);
  } catch (const Error& e) {
    return Refuse(id, e.what(), reply);
  }
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    const std::string no_task = FindTask(id, header, state);
    if (!no_task.empty()) {
      reply->set_reason(no_task);
      return grpc::Status::OK;
    }
  }
  state->id = id;
  // A model under secure aggregation comes only masked, in its session; a
  // failed result (the client's error says why) brings none.
  const Task& task = state->task;
  state->expected = state->result.ok && task.instructions->train.epochs > 0 && !task.secagg
                        ? task.instructions->global->size()
                        : 0;
  // SCAFFOLD's Δc_i follows the model in the same run of chunks.
  const size_t model_values = state->expected;
  if (model_values > 0 && SendsAlgorithmVector(task.instructions->objective)) state->algorithm_values = model_values;
  if (header.num_samples() != state->registered) {
    // The weight no server can verify is fixed at registration.
    state->why = "claims " + std::to_string(header.num_samples()) + " samples; it registered " +
                 std::to_string(state->registered) + ", its aggregation weight for the run";
  } else if (header.num_params() != static_cast<int64_t>(model_values)) {
    state->why = "announced " + std::to_string(header.num_params()) + " model values, expected " +
                 std::to_string(model_values);
  } else if (header.num_algorithm_values() != static_cast<int64_t>(state->algorithm_values)) {
    state->why = "announced " + std::to_string(header.num_algorithm_values()) +
                 " client algorithm values, expected " + std::to_string(state->algorithm_values);
  } else {
    state->expected += state->algorithm_values;
    state->result.params.reserve(state->expected);  // the server's own model size
  }
  *read_on = true;
  return grpc::Status::OK;
}

std::string ResultIntake::FindTask(int id, const pb::ResultHeader& header, PushState* state) {
  if (registry_.Touch(id, header.session()) == pb::UNKNOWN_SESSION) return "unknown session: register again";
  const Task* task = round_.OpenTask(id);
  if (task == nullptr || task->id != header.task_id()) {
    // A stale result (another model version's task, or one past its
    // round's deadline): that round already counted the client as timed
    // out, so it is only logged, never aggregated.
    const std::string why = "task " + std::to_string(header.task_id()) + " is not open: its round has ended";
    state_.refusals.Refuse("client " + std::to_string(id), "stale results",
                           "PushResult: result ignored: " + why);
    return why;
  }
  state->task = *task;
  state->registered = registry_.SamplesOf(id);
  return "";
}

void ResultIntake::AddChunk(const pb::ResultChunk& chunk, PushState* state) const {
  const size_t chunk_bytes = state_.options.chunk_bytes;
  if (!chunk.has_params()) {
    state->why = "a second header in one result";
  } else if (chunk.params().size() > chunk_bytes) {
    state->why = "a model chunk of " + std::to_string(chunk.params().size()) +
                 " bytes, over the chunk size of " + std::to_string(chunk_bytes) + " (deploy.chunk_kb)";
  } else {
    try {
      AppendFloats(chunk.params(), state->expected, &state->result.params);
    } catch (const Error& e) {
      state->why = e.what();
    }
  }
}

bool ResultIntake::Deliver(const pb::ResultHeader& header, PushState state, Verdict verdict) {
  const int id = state.id;
  if (state.why.empty() && state.result.params.size() != state.expected) {
    state.why = "the result ended after " + std::to_string(state.result.params.size()) + " of " +
                std::to_string(state.expected) + " model values (cut off, or a chunk over the " +
                std::to_string(state_.MessageLimit()) + "-byte message limit)";
  }
  const double elapsed = Since(state.task.opened);
  if (state_.monitor) {
    state_.monitor->AddBytes(
        static_cast<int64_t>(header.ByteSizeLong() + state.result.params.size() * sizeof(float)), 0);
  }
  // SCAFFOLD's Δc_i, the values after the model's.
  if (state.why.empty() && state.algorithm_values > 0) {
    state.result.algorithm_values = TakeAlgorithmValues(&state.result.params, state.algorithm_values);
  }
  Arrival a;
  a.index = state.task.index;
  if (!state.why.empty()) {
    a.result = Failed(id, "refused on arrival: " + state.why, /*timed_out=*/false);
  } else {
    a.result = std::move(state.result);
    a.result.client_id = id;  // whatever it claimed, this is who it is
    a.result.num_samples = state.registered;
    a.result.cost = ResultCost();
    a.result.cost.time_s = elapsed;
    a.result.cost.profiling_time_s = std::clamp(header.profiling_s(), 0.0, elapsed);
    a.result.summed = a.result.ok && state.task.secagg != nullptr;
  }
  a.summed = a.result.summed;
  pb::PushReply* reply = verdict.reply;
  a.verdict = std::make_shared<Verdict>(std::move(verdict));
  std::lock_guard<std::mutex> lock(state_.mutex);
  if (!round_.Close(id, state.task.id, std::move(a))) {
    reply->set_reason("the round ended while the result arrived");
    return false;
  }
  if (state.why.empty()) registry_.CountRound(id, elapsed);
  return true;
}

grpc::Status ResultIntake::Refuse(int id, const std::string& why, pb::PushReply* reply) {
  state_.refusals.Refuse("client " + std::to_string(id), "malformed results",
                         "PushResult: " + Printable(why, 400));
  round_.CloseAsRefused(id, why);
  reply->set_reason(Printable(why, kMaxErrorLength));
  return grpc::Status::OK;
}

}  // namespace fedprof::deploy
