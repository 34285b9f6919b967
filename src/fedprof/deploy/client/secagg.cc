#include "fedprof/deploy/client/secagg.h"

#include <algorithm>
#include <utility>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/secagg/wire.h"

namespace fedprof {

namespace pb = federation::v1;

SecAggIdentity LoadSecAggIdentity(const std::string& tls_dir, int id) {
  SecAggIdentity identity;
  if (tls_dir.empty()) {
    secagg::KeyPair signing = secagg::GenerateEd25519();
    identity.signing_key = std::move(signing.secret);
    identity.verify_key = std::move(signing.public_key);
    return identity;
  }
  try {
    SecAggKeyPair signing = SecAggSigningKey(tls_dir, id);
    identity.signing_key = std::move(signing.secret);
    identity.verify_key = std::move(signing.public_key);
  } catch (const Error& e) {
    // Needed only by a server that aggregates securely, which then refuses
    // the registration: this says why.
    identity.missing = e.what();
  }
  return identity;
}

namespace {

// The session's terms as client `policy` counts them: its own tolerance,
// k and t, under the session's protocol.
SecureAggregationOptions OwnTerms(const secagg::SessionConfig& session, const SecAggPolicy& policy) {
  SecureAggregationOptions own;
  own.protocol = session.protocol;
  own.tolerance = policy.tolerance;
  own.neighbors = policy.neighbors;
  own.threshold = policy.threshold;
  return own;
}

}  // namespace

Contribution ContributionTo(const ReceivedTask& task, const SecAggPolicy& policy) {
  Contribution c;
  c.run = task.secagg->run_id;
  c.round = task.instructions.round;
  c.session = secagg::SessionId(*task.secagg);
  c.task = TaskDigest(task.instructions);
  if (task.instructions.ddg) {
    const SecureAggregationOptions own = OwnTerms(*task.secagg, policy);
    const int invited = static_cast<int>(task.secagg->verify_keys.size());
    DdgRelease r;
    r.encoding = *task.instructions.ddg;
    r.clients = FewestInSum(own, invited);
    r.honest = FewestHonestInSum(own, invited);
    c.release = r;
  }
  return c;
}

namespace {

// What a report task asks, as its ledger line names it.
std::string Asked(const ReportRequest& r) {
  std::string asked;
  const auto add = [&](bool wanted, const char* what) {
    if (wanted) asked += (asked.empty() ? "" : "+") + std::string(what);
  };
  add(r.profile && !r.public_key, "profile");
  add(r.profile && r.public_key, "divergence");
  add(r.loss, "loss");
  add(r.train_loss, "train_loss");
  add(r.evaluate, "evaluate");
  return asked.empty() ? "nothing" : asked;
}

}  // namespace

std::string RefusedReceivedTask(const ReceivedTask& task, const SecAggPolicy& policy, ClientLedger* ledger) {
  if (!task.refused.empty()) return task.refused;
  std::string refused = RefusedTask(task.instructions, task.secagg ? &*task.secagg : nullptr, policy);
  if (!refused.empty()) return refused;
  if (task.instructions.train.epochs == 0) {
    // A report leaves outside any sum: counted, and capped.
    if (!policy.required) return "";
    ReportAnswer answer;
    answer.run = task.run_id.size() == secagg::kKeyBytes ? task.run_id : "";
    answer.round = task.instructions.round;
    answer.asked = Asked(task.instructions.report);
    refused = ledger->TakeReport(answer);
    return refused.empty() ? "" : "refused a report: " + refused;
  }
  if (!task.secagg) {
    if (ledger->budget() > 0) {
      return "refused a task that would send its model in the clear: this client keeps a privacy budget "
             "(dp.client_budget), which an update without noise has no bound against";
    }
    return "";
  }
  refused = ledger->Take(ContributionTo(task, policy));
  return refused.empty() ? "" : "refused the server's secure aggregation: " + refused;
}

std::string SessionAssumptions(const ReceivedTask& task, const SecAggPolicy& policy) {
  const secagg::SessionConfig& session = *task.secagg;
  const int invited = static_cast<int>(session.verify_keys.size());
  const secagg::RoundParams params = secagg::ParamsFor(session);
  const SecureAggregationOptions own = OwnTerms(session, policy);
  return secagg::ProtocolName(session.protocol) + " session of " + std::to_string(invited) +
         " invited: k = " + std::to_string(params.graph.neighbors) +
         ", t = " + std::to_string(params.graph.threshold) + ", at most " + std::to_string(params.corrupt) +
         " colluders (secagg.corrupt = " + FormatDouble(policy.tolerance.corrupt) + " of a fleet of " +
         std::to_string(std::max(invited, policy.tolerance.fleet)) + "), at least " +
         std::to_string(FewestHonestInSum(own, invited)) + " honest clients in the sum";
}

double ClockSent(const SecAggPolicy& policy, double compute_s, FitResult* result) {
  if (!policy.required && !policy.distributed_dp) return compute_s;
  result->cost = ResultCost();
  return 0;
}

std::unique_ptr<SecAggParticipation> SecAggParticipation::Join(const ReceivedTask& task, int64_t client_id,
                                                               const secagg::Bytes& signing_key,
                                                               size_t chunk_bytes, FitResult* result,
                                                               const SecAggPolicy& policy) {
  std::vector<secagg::Word> input;
  try {
    const auto noise =
        ClientNoise(policy.noise.kind, policy.noise.key, policy.dp_seed, task.instructions, client_id);
    input = SessionInput(task.instructions, *result, *noise);
  } catch (const Error& e) {
    result->ok = false;
    result->error = std::string("its model cannot be securely aggregated: ") + e.what();
  }
  result->params = FlatParams();
  KeepOnlyWhatTheTaskAsks(task.instructions, policy.distributed_dp, result);
  if (!result->ok) return nullptr;
  return std::unique_ptr<SecAggParticipation>(
      new SecAggParticipation(task, client_id, signing_key, chunk_bytes, std::move(input)));
}

SecAggParticipation::SecAggParticipation(const ReceivedTask& task, int64_t client_id,
                                         const secagg::Bytes& signing_key, size_t chunk_bytes,
                                         std::vector<secagg::Word> input)
    : client_(*task.secagg, client_id, signing_key),
      chunk_words_(std::max<size_t>(1, chunk_bytes / static_cast<size_t>(task.secagg->word_bits / 8))),
      wait_s_(task.secagg_wait_s),
      round_(task.instructions.round),
      input_(std::move(input)) {}

SecAggParticipation::Step SecAggParticipation::Answer(const pb::SecAggReply& reply) {
  const std::string server = "the server";
  Step next;
  switch (reply.message_case()) {
    case pb::SecAggReply::kRoster:
      *next.request.mutable_roster_signature() =
          secagg::ToWire(client_.SignRoster(secagg::FromWire(reply.roster(), server)));
      return next;
    case pb::SecAggReply::kDirectory:
      *next.request.mutable_shares() =
          secagg::ToWire(client_.Share(secagg::FromWire(reply.directory(), server)));
      return next;
    case pb::SecAggReply::kBundle:
      return SendMasked(reply);
    case pb::SecAggReply::kSurvivors:
      *next.request.mutable_signature() =
          secagg::ToWire(client_.Check(secagg::FromWire(reply.survivors(), server)));
      return next;
    case pb::SecAggReply::kUnmask:
      *next.request.mutable_unmask() =
          secagg::ToWire(client_.Unmask(secagg::FromWire(reply.unmask(), server)));
      return next;
    case pb::SecAggReply::MESSAGE_NOT_SET:
      return AnswerEmpty();
  }
  throw Error("the server answered with a message of no secure aggregation round");
}

SecAggParticipation::Step SecAggParticipation::SendMasked(const pb::SecAggReply& reply) {
  const secagg::MaskedInput masked = client_.Mask(secagg::FromWire(reply.bundle(), "the server"), input_);
  input_ = {};
  masked_chunks_ = secagg::ToWire(masked, chunk_words_, static_cast<size_t>(client_.config().word_bits / 8));
  next_chunk_ = 0;
  stage_ = Stage::kSendingMasked;
  return NextChunk();
}

SecAggParticipation::Step SecAggParticipation::NextChunk() {
  Step next;
  *next.request.mutable_masked() = std::move(masked_chunks_[next_chunk_++]);
  return next;
}

SecAggParticipation::Step SecAggParticipation::AnswerEmpty() {
  if (stage_ == Stage::kNotStarted) {
    stage_ = Stage::kAdvertised;
    Step next;
    *next.request.mutable_advertise() = secagg::ToWire(client_.Advertise());
    return next;
  }
  if (stage_ != Stage::kSendingMasked) throw Error("the server answered without the session's next message");
  if (next_chunk_ < masked_chunks_.size()) return NextChunk();
  // The server holds the whole masked model: a message of none asks for the
  // survivor list.
  masked_chunks_.clear();
  stage_ = Stage::kMaskedDelivered;
  Step next;
  next.delivered = true;
  return next;
}

}  // namespace fedprof
