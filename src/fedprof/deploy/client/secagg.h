#ifndef FEDPROF_DEPLOY_CLIENT_SECAGG_H_
#define FEDPROF_DEPLOY_CLIENT_SECAGG_H_

// A deployment client's side of secure aggregation (docs/secagg.md): its
// keys, whether it takes a task at all, and its part in a session, one
// message of the server's at a time. For the deployment's own .cc files
// and tests.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "federation.pb.h"
#include "fedprof/deploy/client/task.h"
#include "fedprof/privacy/client_ledger.h"
#include "fedprof/protocol/messages.h"
#include "fedprof/secagg/client.h"
#include "fedprof/transport/secure_aggregation.h"
#include "secagg.pb.h"

namespace fedprof {

// The client's secure aggregation identity, an Ed25519 key pair for every
// session.
struct SecAggIdentity {
  secagg::Bytes signing_key, verify_key;
  std::string missing;  // why it has none, if so
};
// Under TLS the key issued with client `id`'s certificate, whose public
// half every client finds in secagg-roster (so the server cannot substitute
// it); in plaintext (`tls_dir` "", loopback) a key of this process's own.
SecAggIdentity LoadSecAggIdentity(const std::string& tls_dir, int id);

// Why the client refuses `task`, or "": a session its check of the setup
// refused, a task that would break its own `policy` (RefusedTask), or a
// contribution its `ledger` refuses (a session, round or task it
// contributed to before, a round that goes back, or past its budget). A
// training task's contribution is recorded in the ledger first, before any
// work; so is a report (a task without training) of a client under secure
// aggregation, which the ledger refuses past its limits. A training task in
// the clear is refused by a client that keeps a budget.
std::string RefusedReceivedTask(const ReceivedTask& task, const SecAggPolicy& policy, ClientLedger* ledger);
// The contribution `task`'s training would make to its session, as client
// `policy` counts it (its own tolerance and the session's size).
Contribution ContributionTo(const ReceivedTask& task, const SecAggPolicy& policy);
// What the client assumed of `task`'s session, for its own log: the
// invited n, k and t, the colluders c among its fleet, and the fewest honest
// clients in the sum.
std::string SessionAssumptions(const ReceivedTask& task, const SecAggPolicy& policy);
// The client's time for a task that its result's header states: none under
// secure aggregation or distributed DP (the time grows with its sample
// count, and the server's operator picks the epochs and batch size that
// would amplify it), and then none of the result's cost either; else
// `compute_s`. The server prices a round by the times it measures itself.
double ClockSent(const SecAggPolicy& policy, double compute_s, FitResult* result);

// The client's part in one session: its model goes into the sum masked,
// the result to the server without it.
class SecAggParticipation {
 public:
  // Takes `result`'s model as this client's input to `task`'s session
  // (SessionInput: under distributed DP its update, noised as `policy`
  // says) and leaves the result without it, and without what the task does
  // not ask for (KeepOnlyWhatTheTaskAsks). Null when the model cannot be
  // securely aggregated: `result` then failed, saying why.
  static std::unique_ptr<SecAggParticipation> Join(const ReceivedTask& task, int64_t client_id,
                                                   const secagg::Bytes& signing_key, size_t chunk_bytes,
                                                   FitResult* result, const SecAggPolicy& policy = {});

  struct Step {
    federation::v1::SecAggRequest request;  // the next message to send
    bool delivered = false;                 // the server now holds the whole masked model
  };
  // What answers the server's `reply` (an empty one: the start). Throws
  // fedprof::Error when the server breaks the protocol.
  Step Answer(const federation::v1::SecAggReply& reply);

  double wait_s() const { return wait_s_; }  // how long the server may hold a reply
  int64_t round() const { return round_; }

 private:
  SecAggParticipation(const ReceivedTask& task, int64_t client_id, const secagg::Bytes& signing_key,
                      size_t chunk_bytes, std::vector<secagg::Word> input);
  // A reply without a message: the start, or a chunk of the masked model
  // taken.
  Step AnswerEmpty();
  Step SendMasked(const federation::v1::SecAggReply& reply);
  Step NextChunk();

  // Where the session is, for the server's answers that carry no message.
  enum class Stage { kNotStarted, kAdvertised, kSendingMasked, kMaskedDelivered };

  secagg::SecAggClient client_;
  const size_t chunk_words_;
  const double wait_s_;
  const int64_t round_;
  std::vector<secagg::Word> input_;
  std::vector<secagg::v1::MaskedInputChunk> masked_chunks_;
  size_t next_chunk_ = 0;
  Stage stage_ = Stage::kNotStarted;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_SECAGG_H_
