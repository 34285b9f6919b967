#ifndef FEDPROF_TRANSPORT_SECURE_AGGREGATION_H_
#define FEDPROF_TRANSPORT_SECURE_AGGREGATION_H_

// Secure aggregation around the transport of clients that live in this
// process or on the ranks of a distributed simulation. Each accepted
// result's model becomes its client's input to one SecAgg / SecAgg+ session
// per round (secagg/in_process.h: the deployment's messages, encoded and
// checked); the round loop receives every result without its model
// (FitResult::summed) and then only the session's unmasked sum, exactly the
// sum its plaintext aggregation would make (ModelSum::TermWords). A client
// whose masked model is not in the sum (it dropped out before sending it,
// or was excluded) loses its model for the round, as a relay's lost sum
// does; a session that cannot finish loses them all.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fedprof/secagg/graph.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/sim/cost_model.h"
#include "fedprof/transport/forwarding.h"

namespace fedprof {

// A run's secure aggregation in the sessions' terms: secagg.* as secagg/
// takes it (a parsed Protocol, a Tolerance) merged with the run's seed and
// report.progress. A deployment's server holds one too. A run's is made by
// SecureAggregationFrom (run/plan.h) alone.
struct SecureAggregationOptions {
  secagg::Protocol protocol = secagg::Protocol::kSecAggPlus;
  secagg::Tolerance tolerance;
  int neighbors = 0;  // k, 0: chosen from the tolerance
  int threshold = 0;  // t, 0: chosen from the tolerance
  // The share of each session's clients that stop answering once their
  // masked input is sent (simulated dropouts; their models still count).
  double drop_after_masking = 0;
  uint64_t seed = 0;  // picks the dropouts
  bool progress = false;  // a line per session
};

// What one session cost, as secagg/in_process.h measures it.
struct SecureAggregationCost {
  int clients = 0;        // |U_1|
  int survivors = 0;      // |U_3|: the models in the sum
  int neighbors = 0;      // k
  int threshold = 0;      // t
  double client_bytes_sent = 0;  // mean over the clients
  double client_bytes_received = 0;
  double client_seconds = 0;  // mean CPU seconds
  int64_t server_bytes_received = 0;
  double server_seconds = 0;
  // The session's wall time (in a deployment from the round's last result to the sum).
  double wall_seconds = 0;
};

// What the cost model charges each client of a round of `clients` for its
// session, inputs of `length` words: the bytes of its messages
// (secagg::TrafficOfOneClient, k and the signature quorum as the session
// would choose them) and, for its work, kMaskCyclesPerWord for each word of
// each of its k + 1 masks.
SessionLoad SecureAggregationLoad(const SecureAggregationOptions& options, int clients, size_t length);
// A client's CPU cycles per input word per mask: secagg_bench's SecAgg
// client at K = 100 (docs/secagg.md, Cost), 82.2 ms for 100 masks of
// 61,707 words at 2.1 GHz, all its other work folded in.
constexpr double kMaskCyclesPerWord = 28;

// What a client demands of the server, from its own configuration
// (secagg.*): the server can neither lower it nor turn it off.
struct SecAggPolicy {
  // secagg.protocol is not none: the models this client trains leave it
  // only masked, and nothing else it sends reveals them.
  bool required = false;
  // secagg.clear_profiles: under `required`, a profile may still be sent in
  // the clear (FedProf without Paillier matching).
  bool clear_profiles = false;
  // What sets the k and t this client accepts (secagg::ParamsFor).
  secagg::Tolerance tolerance;
  int neighbors = 0, threshold = 0;
};

// Why a client under `policy` refuses a task (whose training would go into
// a secure aggregation session if `has_setup`), or "": under `required`,
// a training task without a session (its model would go in the clear), a
// profile asked for in the clear (unless clear_profiles), or a sketch of
// the update.
std::string RefusedTask(const FitInstructions& task, bool has_setup, const SecAggPolicy& policy);

// The server's config of round `round`'s session of the clients of
// `verify_keys`, for `length`-word inputs: the run's id, a fresh nonce, the
// options' protocol and tolerance, and the k and t they give for that many
// clients (which each client checks against its own).
secagg::SessionConfig SessionConfigFor(const SecureAggregationOptions& options, const secagg::Bytes& run_id,
                                       int64_t round, size_t length,
                                       std::map<int64_t, secagg::Bytes> verify_keys);

// How a session ended, in process or over the network.
struct SessionOutcome {
  std::vector<int64_t> clients;  // whose accepted results entered it
  bool finished = false;
  std::string failure;  // when not finished: why
  secagg::AggregateResult result;  // when finished
  // Clients left out: excluded by the server, or gone of their own accord
  // (an honest client refusing the server), with why.
  std::map<int64_t, std::string> excluded, aborted;
  // Why each client of `clients` whose model is not in the sum is out.
  std::map<int64_t, std::string> Lost() const;
};

// Hands a session's outcome to the round loop: a session that did not
// finish loses every model; one that did gives the sum of the survivors'
// models (refused whole when no inputs of that many honest clients could
// make it: secure aggregation cannot tell whose input was garbage) and the
// loss of each other client, with why. `index_of` gives each client's index
// in the Fit call.
void HandOverSession(const SessionOutcome& outcome, const std::map<int64_t, size_t>& index_of,
                     const Transport::ResultSink& sink);

// The progress line of a session of round `round`.
std::string DescribeSession(int64_t round, secagg::Protocol protocol, const SecureAggregationCost& cost);

class SecureAggregationTransport : public ForwardingTransport {
 public:
  // `inner` must outlive this transport.
  SecureAggregationTransport(Transport& inner, SecureAggregationOptions options);

  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;

  // The sessions run so far, in order.
  const std::vector<SecureAggregationCost>& sessions() const { return sessions_; }

 private:
  SecureAggregationOptions options_;
  const secagg::Bytes run_id_;  // the sessions' run
  std::vector<SecureAggregationCost> sessions_;
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_SECURE_AGGREGATION_H_
