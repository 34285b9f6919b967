#ifndef FEDPROF_SECAGG_SERVER_H_
#define FEDPROF_SECAGG_SERVER_H_

// The server's side of one secure-aggregation session (Bonawitz et al.,
// CCS 2017, Fig. 4; SecAgg+, Bell et al., CCS 2020, Algorithm 2). For each
// round it receives the clients' messages (Receive*: checks the message
// and either takes it or excludes its sender, with a logged reason, and
// returns false) and then closes the round (Close*: what to send to whom;
// throws fedprof::Error when too few clients are left for the round to
// succeed, which fails the aggregation round like any round below quorum).
//
// The server never holds a client's unmasked input: a masked input y_u is
// added into one running total the moment it is checked, and is not kept;
// no method takes or returns an individual input; Finish removes only
// masks, from the total, and refuses to do so for fewer than
// RoundParams::min_survivors clients. What it learns is
// Σ_{u ∈ U_3} x_u mod 2^128 and who is in U_3.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fedprof/secagg/messages.h"
#include "fedprof/secagg/shamir.h"

namespace fedprof::secagg {

class SecAggServer {
 public:
  // The clients invited are those of config.verify_keys. Throws
  // fedprof::Error if the config cannot run a session (CheckConfig).
  explicit SecAggServer(SessionConfig config);

  // Round 0: AdvertiseKeys. `sender` is the client the transport
  // authenticated; the message must be its own.
  bool ReceiveAdvertise(int64_t sender, const AdvertiseKeys& message);
  // U_1 with every member's commitment, the same for all.
  Roster CloseAdvertise();

  // Round 0′: RosterSignature, with the sender's graph nonce.
  bool ReceiveRosterSignature(int64_t sender, const RosterSignature& message);
  // For each client of U_1, its key directory over the graph the nonces
  // give. Every member of U_1 must have signed and revealed: otherwise the
  // round fails (a graph from the nonces of whoever the server chose to
  // keep would be the server's to pick).
  std::map<int64_t, KeyDirectory> CloseRoster();

  // Round 1: ShareKeys.
  bool ReceiveShares(int64_t sender, const ShareKeys& message);
  // U_2 and, for each client of it, the shares addressed to it.
  std::map<int64_t, ShareBundle> CloseShares();

  // Round 2: MaskedInputCollection; y_u goes straight into the total.
  bool ReceiveMasked(int64_t sender, const MaskedInput& message);
  SurvivorList CloseMasked();  // U_3

  // Round 3: ConsistencyCheck.
  bool ReceiveSignature(int64_t sender, const ConsistencySignature& message);
  // To every client of U_4 (signers()), once at least RoundParams::quorum
  // signed; it carries the first quorum of their signatures.
  UnmaskRequest CloseConsistency();
  // U_4: who signed U_3, and is asked to unmask.
  std::vector<int64_t> signers() const;

  // Round 4: Unmasking.
  bool ReceiveUnmask(int64_t sender, const UnmaskResponse& message);
  // Reconstructs b_u for u ∈ U_3 and s_v^SK for v ∈ U_2 \ U_3 from t shares
  // each (checked against the commitment and the advertised key), removes
  // the masks and returns the sum. Throws fedprof::Error (the round fails)
  // when some secret has fewer than t usable shares.
  AggregateResult Finish();

  // Excludes `client` for a message that did not even decode (wire.h's
  // FromWire refused it, with `why`).
  void Refuse(int64_t client, const std::string& why);

  // Clients left out, with why (their messages were malformed or
  // inconsistent); dropouts are not listed.
  const std::map<int64_t, std::string>& excluded() const { return excluded_; }
  // The session's parameters (for its n invited clients).
  const RoundParams& params() const { return params_; }
  const Bytes& session_id() const { return session_; }
  // The running total of the masked inputs taken so far: the only place
  // inputs go (tests check what it holds).
  const std::vector<Word>& aggregation_buffer() const { return total_; }

 private:
  enum class Phase { kAdvertise, kRoster, kShare, kMask, kCheck, kUnmask, kDone };
  bool Accepting(Phase phase, int64_t sender, bool eligible, bool received, const char* round);
  bool Exclude(int64_t client, const std::string& why);
  void Expect(Phase phase, const char* what);
  [[noreturn]] void Fail(const std::string& why);
  // The secret `owner` shared, from the shares of one kind its neighbours
  // revealed; `verified` says whether a candidate is the committed secret.
  template <typename Check>
  Bytes Recover(int64_t owner, ShareKind kind, Check verified);

  SessionConfig config_;
  Bytes session_;  // SessionId(config_)
  std::set<int64_t> invited_;
  Phase phase_ = Phase::kAdvertise;
  Bytes probe_key_;  // an X25519 key of the server's, to test advertised keys
  RoundParams params_;
  std::map<int64_t, AdvertiseKeys> advertised_;  // U_1
  Roster roster_;
  Bytes roster_digest_;
  std::map<int64_t, RosterSignature> roster_signatures_;
  std::map<int64_t, std::vector<int64_t>> graph_;
  std::map<int64_t, ShareKeys> shares_;  // U_2
  std::set<int64_t> masked_;             // U_3
  std::vector<Word> total_;
  std::vector<int64_t> survivors_;  // U_3, sorted
  std::map<int64_t, ConsistencySignature> signatures_;  // U_4
  std::set<int64_t> answered_;                          // U_5
  // Revealed shares by owner and kind, each with its holder.
  std::map<std::pair<int64_t, int>, std::vector<Share>> revealed_;
  std::map<int64_t, std::string> excluded_;
  Reconstructor reconstructor_;
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_SERVER_H_
