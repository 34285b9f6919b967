#include "fedprof/deploy/server/secagg_sessions.h"

#include <algorithm>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"

namespace fedprof {

namespace pb = federation::v1;

SecAggRendezvous::SecAggRendezvous(secagg::SessionConfig config, std::map<int64_t, int64_t> task_of,
                                   double phase_timeout_s, RefusalLog* refusals)
    : config_(std::move(config)),
      task_of_(std::move(task_of)),
      phase_timeout_s_(phase_timeout_s),
      refusals_(refusals),
      server_(config_) {}

SecAggRendezvous::~SecAggRendezvous() {
  std::unique_lock<std::mutex> lock(mutex_);
  phase_ = Phase::kDone;
  AnswerAll("the server stopped");
  Flush(lock);
}

void SecAggRendezvous::Admit(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  admitted_.insert(id);
}

void SecAggRendezvous::Answer(int64_t id, bool more, const std::string& reason,
                              const std::function<void(pb::SecAggReply*)>& fill) {
  const auto it = held_.find(id);
  if (it == held_.end()) {
    // A client whose masked model is in asks for what follows with its
    // next call (which may come after the round closed).
    pb::SecAggReply& later = undelivered_[id];
    later.set_more(more);
    later.set_reason(Printable(reason, 400));
    if (fill) fill(&later);
    return;
  }
  HeldReply held = std::move(it->second);
  held_.erase(it);
  held.reply->set_more(more);
  held.reply->set_reason(Printable(reason, 400));
  if (fill) fill(held.reply);
  to_finish_.push_back(std::move(held));
}

void SecAggRendezvous::AnswerAll(const std::string& why) {
  while (!held_.empty()) Answer(held_.begin()->first, false, why);
}

void SecAggRendezvous::Drop(int64_t id, const std::string& why) {
  server_.Refuse(id, why);
  assembling_.erase(id);
  Answer(id, false, "excluded from secure aggregation: " + why);
}

void SecAggRendezvous::LogRefusal(int64_t id, const std::string& kind, const std::string& why) {
  if (refusals_ != nullptr) {
    refusals_->Refuse("client " + std::to_string(id), "SecAgg " + kind, "SecAgg: " + Printable(why, 400));
  }
}

void SecAggRendezvous::Flush(std::unique_lock<std::mutex>& lock) {
  std::vector<HeldReply> done;
  done.swap(to_finish_);
  lock.unlock();
  for (HeldReply& held : done) held.finish();
  lock.lock();
}

void SecAggRendezvous::AnswerNow(HeldReply held, bool more, const std::string& reason,
                                 std::unique_lock<std::mutex>& lock) {
  held.reply->set_more(more);
  held.reply->set_reason(Printable(reason, 400));
  to_finish_.push_back(std::move(held));
  Flush(lock);
}

void SecAggRendezvous::RefuseNow(int64_t id, HeldReply held, const std::string& kind, const std::string& why,
                                 std::unique_lock<std::mutex>& lock) {
  LogRefusal(id, kind, why);
  AnswerNow(std::move(held), false, why, lock);
}

void SecAggRendezvous::Take(int64_t id, const pb::SecAggRequest& request, HeldReply held) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (Unwelcome(id, request, held, lock)) return;
  const bool was_excluded = server_.excluded().count(id) != 0;
  const int64_t bytes = static_cast<int64_t>(request.ByteSizeLong());
  bytes_received_ += bytes;
  received_by_[id] += bytes;
  const auto start = Clock::now();
  Receipt receipt = Receipt::kRefused;
  try {
    receipt = Receive(id, request, held, lock);
  } catch (const Error& e) {
    assembling_.erase(id);
    server_.Refuse(id, e.what());
  }
  if (receipt == Receipt::kSettled) return;
  cost_.server_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  if (receipt == Receipt::kRefused) {
    const auto excluded = server_.excluded().find(id);
    if (excluded == server_.excluded().end()) {
      RefuseNow(id, std::move(held), "out of turn", "a message the session's current round does not take",
                lock);
    } else if (was_excluded) {
      RefuseNow(id, std::move(held), "after its exclusion",
                "excluded from secure aggregation: " + excluded->second, lock);
    } else {
      // Excluded by this message: the session logged why.
      AnswerNow(std::move(held), false, "excluded from secure aggregation: " + excluded->second, lock);
    }
    return;
  }
  held_[id] = std::move(held);
  answered_.insert(id);
  answered_cv_.notify_all();
}

bool SecAggRendezvous::Unwelcome(int64_t id, const pb::SecAggRequest& request, HeldReply& held,
                                 std::unique_lock<std::mutex>& lock) {
  const auto task = task_of_.find(id);
  if (task == task_of_.end() || task->second != request.task_id()) {
    RefuseNow(id, std::move(held), "for no open session",
              "task " + std::to_string(request.task_id()) + " has no secure aggregation open", lock);
    return true;
  }
  if (phase_ == Phase::kDone) {
    RefuseNow(id, std::move(held), "after its session", "the session has ended", lock);
    return true;
  }
  if (admitted_.count(id) == 0) {
    RefuseNow(id, std::move(held), "before its result", "its result is not (or not yet) accepted", lock);
    return true;
  }
  if (held_.count(id) != 0) {
    // One message at a time: a second while one waits breaks the protocol.
    Drop(id, "a message while its last one awaits an answer");
    AnswerNow(std::move(held), false, "excluded from secure aggregation: two messages at once", lock);
    return true;
  }
  return false;
}

SecAggRendezvous::Receipt SecAggRendezvous::Receive(int64_t id, const pb::SecAggRequest& request,
                                                    HeldReply& held, std::unique_lock<std::mutex>& lock) {
  const std::string origin = "client " + std::to_string(id);
  const auto taken = [](bool yes) { return yes ? Receipt::kTaken : Receipt::kRefused; };
  switch (request.message_case()) {
    case pb::SecAggRequest::kAdvertise:
      return taken(phase_ == Phase::kAdvertise &&
                   server_.ReceiveAdvertise(id, secagg::FromWire(request.advertise(), origin)));
    case pb::SecAggRequest::kRosterSignature:
      return taken(phase_ == Phase::kRoster &&
                   server_.ReceiveRosterSignature(id, secagg::FromWire(request.roster_signature(), origin)));
    case pb::SecAggRequest::kShares:
      return taken(phase_ == Phase::kShare &&
                   server_.ReceiveShares(id, secagg::FromWire(request.shares(), origin)));
    case pb::SecAggRequest::kMasked:
      return ReceiveMasked(id, request.masked(), held, lock);
    case pb::SecAggRequest::kSignature:
      return taken(phase_ == Phase::kCheck &&
                   server_.ReceiveSignature(id, secagg::FromWire(request.signature(), origin)));
    case pb::SecAggRequest::kUnmask:
      return taken(phase_ == Phase::kUnmask &&
                   server_.ReceiveUnmask(id, secagg::FromWire(request.unmask(), origin)));
    case pb::SecAggRequest::MESSAGE_NOT_SET:
      return ReceiveNoMessage(id, held, lock);
  }
  return Receipt::kRefused;
}

SecAggRendezvous::Receipt SecAggRendezvous::ReceiveMasked(int64_t id,
                                                          const secagg::v1::MaskedInputChunk& chunk,
                                                          HeldReply& held,
                                                          std::unique_lock<std::mutex>& lock) {
  if (phase_ != Phase::kMask) return Receipt::kRefused;
  auto& assembler = assembling_[id];
  if (!assembler) {
    assembler =
        std::make_unique<secagg::MaskedInputAssembler>(config_.length, "client " + std::to_string(id),
                                                       static_cast<size_t>(config_.word_bits / 8));
  }
  assembler->Add(chunk);
  if (!assembler->complete()) {
    AnswerNow(std::move(held), true, "", lock);  // the next chunk
    return Receipt::kSettled;
  }
  const secagg::MaskedInput input = assembler->Finish();
  assembling_.erase(id);
  if (!server_.ReceiveMasked(id, input)) return Receipt::kRefused;
  // Acknowledged at once, so that the client knows its model is in; it then
  // waits for the survivor list with a call of no message.
  answered_.insert(id);
  answered_cv_.notify_all();
  AnswerNow(std::move(held), true, "", lock);
  return Receipt::kSettled;
}

SecAggRendezvous::Receipt SecAggRendezvous::ReceiveNoMessage(int64_t id, HeldReply& held,
                                                             std::unique_lock<std::mutex>& lock) {
  // A client waiting for what follows its masked model.
  const auto later = undelivered_.find(id);
  if (later != undelivered_.end()) {
    const uint32_t version = held.reply->protocol_version();
    *held.reply = std::move(later->second);
    held.reply->set_protocol_version(version);
    undelivered_.erase(later);
    to_finish_.push_back(std::move(held));
    Flush(lock);
    return Receipt::kSettled;
  }
  if (phase_ == Phase::kMask && answered_.count(id) != 0) {
    held_[id] = std::move(held);
    return Receipt::kSettled;
  }
  server_.Refuse(id, "a secure aggregation call without a message, out of turn");
  return Receipt::kRefused;
}

void SecAggRendezvous::AwaitPhase(std::unique_lock<std::mutex>& lock, const std::set<int64_t>& expected,
                                  const std::function<bool(int64_t)>& alive) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(phase_timeout_s_));
  while (Clock::now() < deadline) {
    std::vector<int64_t> waiting;
    for (int64_t id : expected) {
      if (answered_.count(id) == 0 && server_.excluded().count(id) == 0) waiting.push_back(id);
    }
    if (waiting.empty()) return;
    lock.unlock();
    const bool anyone = std::any_of(waiting.begin(), waiting.end(), alive);
    lock.lock();
    if (!anyone) return;
    answered_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
  }
}

void SecAggRendezvous::CloseRound(std::unique_lock<std::mutex>& lock, const std::set<int64_t>& expected,
                                  const std::function<bool(int64_t)>& alive, Phase next,
                                  const std::function<void()>& close) {
  AwaitPhase(lock, expected, alive);
  const auto start = Clock::now();
  answered_.clear();
  phase_ = next;
  close();
  cost_.server_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  AnswerAll("left behind: its round closed without it");
  Flush(lock);
}

void SecAggRendezvous::RunRounds(std::unique_lock<std::mutex>& lock,
                                 const std::function<bool(int64_t)>& alive, SecAggOutcome* out) {
  std::set<int64_t> expected = admitted_;
  CloseRound(lock, expected, alive, Phase::kRoster, [&] {
    const secagg::pb::Roster wire = secagg::ToWire(server_.CloseAdvertise());  // one encoding for all
    expected.clear();
    for (int64_t id : wire.clients()) {
      expected.insert(id);
      Answer(id, true, "", [&](pb::SecAggReply* r) { *r->mutable_roster() = wire; });
    }
  });
  CloseRound(lock, expected, alive, Phase::kShare, [&] {
    const std::map<int64_t, secagg::KeyDirectory> directories = server_.CloseRoster();
    expected.clear();
    for (const auto& entry : directories) {
      expected.insert(entry.first);
      Answer(entry.first, true, "",
             [&](pb::SecAggReply* r) { *r->mutable_directory() = secagg::ToWire(entry.second); });
    }
  });
  CloseRound(lock, expected, alive, Phase::kMask, [&] {
    const std::map<int64_t, secagg::ShareBundle> bundles = server_.CloseShares();
    expected.clear();
    for (const auto& entry : bundles) {
      expected.insert(entry.first);
      Answer(entry.first, true, "",
             [&](pb::SecAggReply* r) { *r->mutable_bundle() = secagg::ToWire(entry.second); });
    }
  });
  CloseRound(lock, expected, alive, Phase::kCheck, [&] {
    const secagg::SurvivorList survivors = server_.CloseMasked();
    const secagg::pb::SurvivorList wire = secagg::ToWire(survivors);  // one encoding for all
    expected.clear();
    for (int64_t id : survivors.survivors) {
      expected.insert(id);
      Answer(id, true, "", [&](pb::SecAggReply* r) { *r->mutable_survivors() = wire; });
    }
  });
  CloseRound(lock, expected, alive, Phase::kUnmask, [&] {
    const secagg::pb::UnmaskRequest wire = secagg::ToWire(server_.CloseConsistency());
    expected.clear();
    for (const int64_t id : server_.signers()) {
      expected.insert(id);
      Answer(id, true, "", [&](pb::SecAggReply* r) { *r->mutable_unmask() = wire; });
    }
  });
  CloseRound(lock, expected, alive, Phase::kDone, [&] {
    out->result = server_.Finish();
    out->finished = true;
    for (int64_t id : out->result.survivors) Answer(id, false, "");  // in the sum
  });
}

SecAggOutcome SecAggRendezvous::Run(const std::function<bool(int64_t)>& alive) {
  SecAggOutcome out;
  const auto began = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  out.clients.assign(admitted_.begin(), admitted_.end());
  // Each round: wait for its messages, close it, answer the held replies.
  try {
    RunRounds(lock, alive, &out);
  } catch (const Error& e) {
    phase_ = Phase::kDone;
    out.failure = e.what();
    AnswerAll(std::string("the session failed: ") + e.what());
    Flush(lock);
  }
  out.excluded = server_.excluded();
  cost_.clients = static_cast<int>(out.clients.size());
  cost_.survivors = static_cast<int>(out.result.survivors.size());
  cost_.neighbors = server_.params().graph.neighbors;
  cost_.threshold = server_.params().graph.threshold;
  cost_.server_bytes_received = bytes_received_;
  if (!received_by_.empty()) {
    cost_.client_bytes_sent = static_cast<double>(bytes_received_) / static_cast<double>(received_by_.size());
  }
  cost_.wall_seconds = std::chrono::duration<double>(Clock::now() - began).count();
  out.cost = cost_;
  return out;
}

}  // namespace fedprof
