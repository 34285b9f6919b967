#ifndef FEDPROF_SECAGG_CLIENT_H_
#define FEDPROF_SECAGG_CLIENT_H_

// The client's side of one secure-aggregation session (Bonawitz et al.,
// CCS 2017, Fig. 4; over SecAgg+'s neighbour graph, Bell et al., CCS 2020,
// Algorithm 2), one method per round, to be called in order. Each method
// checks what the server sent and throws fedprof::Error, naming what was
// wrong, when an honest client must abort: the session is then dead and
// every later call throws. The input vector enters at MaskedInputCollection
// and leaves only masked. The server is not trusted with anything: the
// parameters are the client's own (the constructor refuses a session whose
// announced k and t differ), U_1 is signed by every neighbour, the graph
// comes from randomness every client contributes, and the survivor set must
// carry the signatures of a majority of the invited clients.

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "fedprof/secagg/messages.h"

namespace fedprof::secagg {

class SecAggClient {
 public:
  // `signing_key`: this client's Ed25519 private key, whose public half is
  // config.verify_keys[id]. Throws fedprof::Error when the config is not one
  // this client takes part in (CheckConfig: the announced k and t must be
  // the ones its own tolerance gives).
  SecAggClient(SessionConfig config, int64_t id, Bytes signing_key);

  int64_t id() const { return id_; }
  const SessionConfig& config() const { return config_; }
  const Bytes& session_id() const { return session_; }
  const RoundParams& params() const { return params_; }

  // Round 0: fresh key pairs (c_u, s_u) and a commitment to a fresh graph
  // nonce r_u, signed.
  AdvertiseKeys Advertise();
  // Round 0′: checks U_1 (no smaller than n − ⌊δn⌋, of invited clients,
  // with this client's own commitment), signs it and reveals r_u.
  RosterSignature SignRoster(const Roster& roster);
  // Round 1: checks every r against its commitment, derives the graph from
  // them, checks that the neighbours' keys are theirs and that they signed
  // the same U_1, draws b_u, shares s_u^SK and b_u t-of-k among the
  // neighbours, encrypts each pair.
  ShareKeys Share(const KeyDirectory& directory);
  // Round 2: y_u = x_u + PRG(b_u) + Σ_{v ∈ N(u) ∩ U_2} Δ_{u,v} PRG(s_{u,v})
  // mod 2^128, Δ_{u,v} = +1 if u > v, −1 if u < v. `input` has
  // config.length words.
  MaskedInput Mask(const ShareBundle& bundle, const std::vector<Word>& input);
  // Round 3: checks U_3 (no smaller than n − ⌊δn⌋, with t of this client's
  // neighbours) and signs it with U_1.
  ConsistencySignature Check(const SurvivorList& list);
  // Round 4: checks the request against the U_3 this client signed and
  // the signatures of a majority of the invited clients on it (so that no
  // honest client was shown another); reveals b_{v,u} for neighbours v in
  // U_3 and s_{v,u}^SK for neighbours in U_2 \ U_3, never both for one v.
  UnmaskResponse Unmask(const UnmaskRequest& request);

 private:
  enum class Phase { kAdvertise, kRoster, kShare, kMask, kCheck, kUnmask, kDone, kAborted };
  void Expect(Phase phase, const char* round);
  [[noreturn]] void Abort(const std::string& why);

  void Forget();  // the secrets, once done or aborted

  SessionConfig config_;
  int64_t id_;
  Bytes signing_key_;
  Bytes session_;  // SessionId(config_)
  Phase phase_ = Phase::kAdvertise;
  RoundParams params_;
  KeyPair cipher_keys_, mask_keys_;
  Bytes graph_nonce_;                         // r_u
  AdvertiseKeys advertised_;                  // its own, with the commitment to r_u
  Bytes self_mask_seed_;                      // b_u
  Roster roster_;                             // U_1 and its commitments, as signed
  Bytes roster_digest_;
  std::map<int64_t, AdvertiseKeys> peers_;    // N(u): their keys
  std::map<int64_t, Bytes> share_keys_;       // N(u): the pair's AES-GCM key
  std::map<int64_t, Bytes> received_;         // N(u) ∩ U_2: e_{v,u}
  std::vector<int64_t> survivors_;            // U_3 as signed
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_CLIENT_H_
