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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/privacy/noise_source.h"
#include "fedprof/secagg/graph.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/sim/cost_model.h"
#include "fedprof/transport/forwarding.h"

namespace fedprof {

// A run's secure aggregation in the sessions' terms: secagg.* as secagg/
// takes it (a parsed Protocol, a Tolerance) merged with the run's seed and
// report.progress. A deployment's server holds one too. A run's is made by
// SecureAggregationFrom alone.
struct SecureAggregationOptions {
  secagg::Protocol protocol = secagg::Protocol::kSecAggPlus;
  secagg::Tolerance tolerance;
  int neighbors = 0;  // k, 0: chosen from the tolerance
  int threshold = 0;  // t, 0: chosen from the tolerance
  // The share of each session's clients that stop answering once their
  // masked input is sent (simulated dropouts; their models still count).
  double drop_after_masking = 0;
  uint64_t seed = 0;  // picks the dropouts, and (dp.noise = seeded) the clients' distributed-DP noise
  // Distributed DP: where the clients draw their rounding and noise
  // (ClientNoise); under dp.noise = keyed, from each client's key in this
  // directory (privacy/noise_source.h's ClientNoiseKeyPath).
  NoiseKind client_noise = NoiseKind::kSeeded;
  std::string key_dir;
  // dp.mode = distributed: no result leaves a client with a figure of its
  // own (KeepOnlyWhatTheTaskAsks), report-only ones included.
  bool distributed_dp = false;
  bool progress = false;  // a line per session
};

// Secure aggregation as the secagg.* options set it (under secagg.protocol
// "none", the tolerance a client demands of a session it is asked into), in
// the sessions' terms.
SecureAggregationOptions SecureAggregationFrom(const RunOptions& o);

// The tolerance a deployed client with a roster of `roster` clients (every
// client the CA certified) demands: its config's, the colluders counted
// among the roster, or a larger secagg.fleet, never a smaller one (a
// run's config is the server's operator's word under a federation).
secagg::Tolerance ClientTolerance(const RunOptions& run, int roster);

// The fewest clients whose inputs a session of `invited` clients under
// `options` can sum: it unmasks no fewer (RoundParams::min_survivors); 0
// when no session of that many can run (the round's sum is lost).
int FewestInSum(const SecureAggregationOptions& options, int invited);
// Of those, the fewest honest ones: less the colluders the tolerance allows
// (all of them may be in the sum); 0 when no session of that many can run.
int FewestHonestInSum(const SecureAggregationOptions& options, int invited);
// The fewest clients a session under `options` can invite at all (2 at
// least; 0 when none up to `most` can run).
int FewestInvited(const SecureAggregationOptions& options, int most);

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
SessionLoad SecureAggregationLoad(const SecureAggregationOptions& options, int clients, size_t length,
                                  int word_bits = 128);
// A client's CPU cycles per input word per mask: secagg_bench's SecAgg
// client at K = 100 (docs/secagg.md, Cost), 82.2 ms for 100 masks of
// 61,707 words at 2.1 GHz, all its other work folded in.
constexpr double kMaskCyclesPerWord = 28;
// A client's CPU cycles per word of its distributed-DP encoding (rotation,
// rounding, discrete Gaussian noise): `secagg_bench --distributed-dp` at
// K = 100, 20.3 ms for 65,536 words at 2.1 GHz.
constexpr double kDdgEncodeCyclesPerWord = 650;

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
  // Distributed DP (its config's dp.mode = distributed): it trains only for
  // a session whose encoding is the one it computes itself from `dp` and
  // the session's size (DdgMismatch: noise for the fewest honest clients
  // the session's sum may hold, its own clip norm, word width and rounding
  // bound), and sends the server nothing else of its own: no loss, no
  // evaluation, no profile or divergence unless dp_clear_profiles.
  bool distributed_dp = false;
  DdgSettings dp;
  bool dp_clear_profiles = false;
  // Where its noise comes from (its config's dp.noise): its key, or
  // OpenSSL's generator. Seeded noise, with `dp_seed`, is a simulation's,
  // which a deployed client refuses at start.
  NoiseSource noise{NoiseKind::kSecret, ""};
  uint64_t dp_seed = 0;
  // A deployed client's: under `required` it answers only what these say
  // its own strategy reads. None: not checked (the server's own choice, as
  // for the clients a simulation runs).
  std::optional<ClientReads> reads;
};

// Why a client under `policy` refuses a task (whose training would go into
// the secure aggregation session `setup`, or null: none), or "": a task
// under distributed DP when its own config does not say so (it has no
// encoding of its own to hold the server's to); under `required`, a
// training task without a session (its model would go in the clear), a
// profile asked for in the clear (unless clear_profiles), or a sketch of
// the update; under distributed DP, a training task without it or with an
// encoding that is not the client's own for the session, and any report of
// its own (loss, evaluation, or, unless dp_clear_profiles, a profile or
// divergence); under `required` with `reads`, any report the client's own
// strategy does not read.
std::string RefusedTask(const FitInstructions& task, const secagg::SessionConfig* setup,
                        const SecAggPolicy& policy);

// What a result under secure aggregation keeps of what its client computed:
// its model goes into the session, and of its own figures only those the
// task asks for leave in the clear (docs/secagg.md, what the server learns):
// the training loss and loss RMS only when asked (report.train_loss), never
// the clipping indicator. Under distributed DP (`distributed`, a run's or a
// client's), whatever the task: no sample count (every update weighs 1), no
// loss and no evaluation.
void KeepOnlyWhatTheTaskAsks(const FitInstructions& task, bool distributed, FitResult* result);

// The server's config of round `round`'s session of the clients of
// `verify_keys`, for `length`-word inputs of `word_bits` each: the run's id, a fresh nonce, the
// options' protocol and tolerance, and the k and t they give for that many
// clients (which each client checks against its own).
secagg::SessionConfig SessionConfigFor(const SecureAggregationOptions& options, const secagg::Bytes& run_id,
                                       int64_t round, size_t length,
                                       std::map<int64_t, secagg::Bytes> verify_keys, int word_bits = 128);

// The words of a client's input for `task` with a model of `num_params`
// values: the model and its sample count, or under distributed DP the
// encoding's padded length.
size_t SessionLength(const FitInstructions& task, size_t num_params);
// The bits of each word of that input: 128, or under distributed DP the
// encoding's b (whole bytes: the session's sum is exactly modulo 2^b).
int SessionWordBits(const FitInstructions& task);
// A client's input to a session for the result of `task`: its model's
// words of the exact sum (ModelSum::TermWords), or under distributed DP
// (task.ddg) its clipped update encoded and noised (DdgEncode, a word per
// value), the rounding and noise drawn from `noise`. Throws fedprof::Error
// when the model cannot be encoded.
std::vector<secagg::Word> SessionInput(const FitInstructions& task, const FitResult& result,
                                       RandomBits& noise);
// The bits of client `client`'s distributed-DP noise for `task`: seeded by
// (seed, round, client); from OpenSSL's generator; or keyed by the client's
// `key` for the task's digest (TaskDigest: a client contributes once to a
// task, so no two of its contributions share noise).
std::unique_ptr<RandomBits> ClientNoise(NoiseKind kind, const std::string& key, uint64_t seed,
                                        const FitInstructions& task, int64_t client);
// The sum a session's result words make for `count` clients of a round
// whose tasks were like `task`: the exact model sum, or under distributed DP
// the decoded noised sum of the updates from task.global. Throws
// fedprof::Error when no inputs of that many honest clients could make it.
ModelSum SessionSum(const FitInstructions& task, const std::vector<secagg::Word>& words, int64_t count);

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
// in the Fit call; `task` is the round's (SessionSum).
void HandOverSession(const SessionOutcome& outcome, const std::map<int64_t, size_t>& index_of,
                     const FitInstructions& task, const Transport::ResultSink& sink);

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
  // Client `id`'s noise key (dp.noise = keyed), read once.
  const std::string& ClientKey(int64_t id);

  SecureAggregationOptions options_;
  const secagg::Bytes run_id_;  // the sessions' run
  std::vector<SecureAggregationCost> sessions_;
  std::map<int64_t, std::string> client_keys_;
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_SECURE_AGGREGATION_H_
