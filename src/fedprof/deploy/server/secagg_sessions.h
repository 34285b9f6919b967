#ifndef FEDPROF_DEPLOY_SERVER_SECAGG_SESSIONS_H_
#define FEDPROF_DEPLOY_SERVER_SECAGG_SESSIONS_H_

// Secure aggregation over the deployment protocol (proto/federation.proto,
// rpc SecAgg): the server's side of one round's session, between the gRPC
// handlers that bring the clients' messages and the round loop that drives
// the session's rounds.
//
// A client sends one message per call; the call is held until the
// session's round closes (every client it waits for has answered, gone
// silent, or the phase's time is up) and then answered with the server's
// next message to that client, or with the end of the session for it. The
// masked input comes in chunks, each acknowledged at once; its client then
// waits for the survivor list with a call of no message.
// Everything a client sends is decoded by secagg/wire.h and checked by the
// server's state machine (secagg/server.h) before it is used; a client
// whose message fails is excluded from the session, with the reason logged,
// and every message the session refuses is logged once through the
// server's RefusalLog, naming its client (repeats counted).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "federation.pb.h"
#include "fedprof/deploy/server/refusal_log.h"
#include "fedprof/deploy/shared/secagg_setup.h"
#include "fedprof/secagg/server.h"
#include "fedprof/secagg/wire.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// A reply the server holds until it knows what to answer; `finish` ends
// the call once `reply` is filled.
struct HeldReply {
  federation::v1::SecAggReply* reply = nullptr;
  std::function<void()> finish;
};

// What a session over gRPC made, and what it cost the server.
struct SecAggOutcome : SessionOutcome {
  SecureAggregationCost cost;
};

class SecAggRendezvous {
 public:
  // `config.verify_keys` names the clients invited (the round's training
  // tasks), each with the id of its task. Refused messages are logged
  // through `refusals` (may be null: not logged).
  SecAggRendezvous(secagg::SessionConfig config, std::map<int64_t, int64_t> task_of,
                   double phase_timeout_s, RefusalLog* refusals = nullptr);
  ~SecAggRendezvous();

  // The round loop accepted client `id`'s result (without its model): it
  // may join the session.
  void Admit(int64_t id);

  // A client's message (a handler's call, `id` authenticated): answered now
  // or held.
  void Take(int64_t id, const federation::v1::SecAggRequest& request, HeldReply held);

  // The round loop's: runs the session's rounds among the admitted clients
  // (`alive` says whether one is still heard from), answers every held
  // reply, and returns the outcome. Every later message is answered at once.
  SecAggOutcome Run(const std::function<bool(int64_t)>& alive);

 private:
  enum class Phase { kAdvertise, kRoster, kShare, kMask, kCheck, kUnmask, kDone };
  using Clock = std::chrono::steady_clock;
  // Waits until every client of `expected` has answered or left, `alive`
  // says none of those still waited for is there, or the phase's time is
  // up. Lock held.
  void AwaitPhase(std::unique_lock<std::mutex>& lock, const std::set<int64_t>& expected,
                  const std::function<bool(int64_t)>& alive);
  // Answers client `id`'s held reply (lock held: queued, sent once released).
  void Answer(int64_t id, bool more, const std::string& reason,
              const std::function<void(federation::v1::SecAggReply*)>& fill = {});
  // Ends the session for every held reply, with `why`.
  void AnswerAll(const std::string& why);
  // Excludes `id` for `why` and ends its session (lock held).
  void Drop(int64_t id, const std::string& why);
  // Logs a refused message of `id` (`kind` groups the repeats).
  void LogRefusal(int64_t id, const std::string& kind, const std::string& why);
  void Flush(std::unique_lock<std::mutex>& lock);
  // Answers `held` now (lock held; sent before this returns).
  void AnswerNow(HeldReply held, bool more, const std::string& reason, std::unique_lock<std::mutex>& lock);
  // Logs a refused message of `id` and answers it with why.
  void RefuseNow(int64_t id, HeldReply held, const std::string& kind, const std::string& why,
                 std::unique_lock<std::mutex>& lock);

  // Take's steps. Whether `id`'s message comes where no session round may
  // take it (another task, the session over, a client not admitted, a
  // message while its last one is held); if so it is answered.
  bool Unwelcome(int64_t id, const federation::v1::SecAggRequest& request, HeldReply& held,
                 std::unique_lock<std::mutex>& lock);
  // What the session made of a message: refused, taken (its reply to be held
  // until the round closes), or settled (its reply already answered or held).
  enum class Receipt { kRefused, kTaken, kSettled };
  // Hands a message to the session's state machine; throws fedprof::Error
  // for one that fails its checks.
  Receipt Receive(int64_t id, const federation::v1::SecAggRequest& request, HeldReply& held,
                  std::unique_lock<std::mutex>& lock);
  // A masked model's chunk, acknowledged at once.
  Receipt ReceiveMasked(int64_t id, const secagg::v1::MaskedInputChunk& chunk, HeldReply& held,
                        std::unique_lock<std::mutex>& lock);
  // A call of no message: a client whose masked model is in asks for what
  // follows.
  Receipt ReceiveNoMessage(int64_t id, HeldReply& held, std::unique_lock<std::mutex>& lock);

  // Run's steps: each round waits for the messages of `expected`, then
  // `close` moves the session to `next` and answers the held replies.
  void CloseRound(std::unique_lock<std::mutex>& lock, const std::set<int64_t>& expected,
                  const std::function<bool(int64_t)>& alive, Phase next, const std::function<void()>& close);
  void RunRounds(std::unique_lock<std::mutex>& lock, const std::function<bool(int64_t)>& alive,
                 SecAggOutcome* out);

  secagg::SessionConfig config_;
  const std::map<int64_t, int64_t> task_of_;
  const double phase_timeout_s_;
  RefusalLog* const refusals_;
  std::mutex mutex_;
  std::condition_variable answered_cv_;
  secagg::SecAggServer server_;
  Phase phase_ = Phase::kAdvertise;
  std::set<int64_t> admitted_;
  std::set<int64_t> answered_;  // in the current phase
  std::map<int64_t, HeldReply> held_;
  // Answers due to clients with no call held (one whose masked model is in
  // asks for the next message with a call of its own).
  std::map<int64_t, federation::v1::SecAggReply> undelivered_;
  std::map<int64_t, std::unique_ptr<secagg::MaskedInputAssembler>> assembling_;
  std::vector<HeldReply> to_finish_;  // answered under the lock, finished outside it
  SecureAggregationCost cost_;
  int64_t bytes_received_ = 0;
  std::map<int64_t, int64_t> received_by_;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SERVER_SECAGG_SESSIONS_H_
