#ifndef FEDPROF_DEPLOY_SERVER_SERVICE_STATE_H_
#define FEDPROF_DEPLOY_SERVER_SERVICE_STATE_H_

// What the deployment server's parts share (server.cc wires them): its
// options, its one lock, whether the run is done, and the round's tasks as
// every part sees them. For the server's parts only.
//
// One lock, not one per part: a result's arrival closes its task (the
// round), counts its client's round time (the registry) and queues it for
// judging (the round) in one step, and a parked task request keeps its
// client alive (the task streams and the registry); each part's containers
// are its own, and its functions say which expect the lock held.

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "federation.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/deploy/server/access_list.h"
#include "fedprof/deploy/server/admission.h"
#include "fedprof/deploy/server/options.h"
#include "fedprof/deploy/server/refusal_log.h"

namespace fedprof {
class RunObserver;
}

namespace fedprof::deploy {

namespace pb = federation::v1;

struct ServiceState {
  ServiceState(const GrpcServerOptions& o, RunObserver* m)
      : options(o), monitor(m), refusals(m), access(o.access_file) {}

  bool tls() const { return !options.tls_dir.empty(); }
  // The largest message of any call: a model chunk, or a result header.
  size_t MessageLimit() const { return std::max(options.chunk_bytes, kHeaderAllowance) + 4096; }
  // pb::DONE once the run is done, else pb::WAIT (mutex held).
  pb::Status Next() const { return done ? pb::DONE : pb::WAIT; }

  // Housekeeping while the round loop waits (its thread alone): refusal
  // counts whose window passed are written without waiting for the next
  // refusal, and every 30 s the heap's free pages go back to the system.
  // gRPC reads an oversized request whole before it drops it
  // (docs/deploy.md), and glibc would keep those pages for the rest of the
  // run.
  void Tidy();

  const GrpcServerOptions options;
  RunObserver* const monitor;  // the run's observer (--monitor), or null
  RefusalLog refusals;
  AccessList access;  // a federation's enrolled and revoked nodes (--access), or none

  mutable std::mutex mutex;
  std::condition_variable arrive_cv;  // a result arrived, a client registered or heard DONE
  bool done = false;      // the run is over: every call hears DONE
  bool stopping = false;  // the server is going away: nothing more is taken

 private:
  Clock::time_point last_trim_;
};

// One client's task of the current round, or of an asynchronous run
// (streamed: Round::Launch).
struct Task {
  int64_t id = 0;
  size_t index = 0;  // in the Fit call's list; a streamed task's: its client id
  std::shared_ptr<const FitInstructions> instructions;
  // The global model's chunks, shared by every task of the round.
  std::shared_ptr<const std::vector<pb::TaskChunk>> chunks;
  Clock::time_point opened;
  Clock::time_point deadline;  // its result is due by then (deploy.round_timeout_s after opening)
  bool open = true;
  bool streamed = false;
  int64_t batch = 0;  // its relay's batch, or 0: sent directly
  // The round's secure aggregation session, which its model joins.
  std::shared_ptr<const pb::SecAggSetup> secagg;
};

// The tasks of one round that go to one relay, with the model once.
struct Batch {
  int relay = -1;
  pb::RelayTaskChunk header;
  std::shared_ptr<const std::vector<pb::RelayTaskChunk>> chunks;
  bool sent = false;
  std::vector<size_t> awaiting;  // indices of accepted results whose models its sum holds
  bool sum_queued = false;       // its sum (or its loss) awaits judging: no other is taken
  bool sum_in = false;           // judged
};

// The round loop's word on a result goes to the call that brought it
// (a client's PushResult, a relay's RelayResult or RelaySum); `call` is
// null once answered (or when nobody waits: a timeout).
struct Verdict {
  const void* call = nullptr;  // identifies the call, for its cancellation
  pb::PushReply* reply = nullptr;
  std::function<void()> finish;  // ends the call (once its reply is written)
};

// What the round loop judges next: a result, or a relay's partial sum
// (is_sum) of the results at `indices` (a null sum: it will not come).
struct Arrival {
  size_t index = 0;
  FitResult result;
  std::shared_ptr<Verdict> verdict;  // null when no client waits for it (a timeout)
  int64_t batch = 0;       // the relay batch it belongs to, or 0
  bool streamed = false;  // of a streamed task: Round::AwaitStreamed judges it
  bool summed = false;    // a relay's result, its model in the batch's sum
  bool is_sum = false;
  std::vector<size_t> indices;
  std::shared_ptr<const ModelSum> sum;
  std::string lost;  // why a null sum will not come, when it was refused
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_SERVICE_STATE_H_
