#ifndef FEDPROF_SECAGG_CLIENT_H_
#define FEDPROF_SECAGG_CLIENT_H_

// The client's side of one secure-aggregation session (Bonawitz et al.,
// CCS 2017, Fig. 4; over SecAgg+'s neighbour graph, Bell et al., CCS 2020,
// Algorithm 2), one method per round, to be called in order. Each method
// checks what the server sent and throws fedprof::Error, naming what was
// wrong, when an honest client must abort: the session is then dead and
// every later call throws. The input vector enters at MaskedInputCollection
// and leaves only masked.

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "fedprof/secagg/messages.h"

namespace fedprof::secagg {

class SecAggClient {
 public:
  // `signing_key`: this client's Ed25519 private key, whose public half is
  // config.verify_keys[id].
  SecAggClient(SessionConfig config, int64_t id, Bytes signing_key);

  int64_t id() const { return id_; }

  // Round 0: fresh key pairs (c_u, s_u), signed.
  AdvertiseKeys Advertise();
  // Round 1: checks U_1 and the neighbours' signed keys, draws b_u, shares
  // s_u^SK and b_u t-of-k among the neighbours, encrypts each pair.
  ShareKeys Share(const KeyDirectory& directory);
  // Round 2: y_u = x_u + PRG(b_u) + Σ_{v ∈ N(u) ∩ U_2} Δ_{u,v} PRG(s_{u,v})
  // mod 2^128, Δ_{u,v} = +1 if u > v, −1 if u < v. `input` has
  // config.length words.
  MaskedInput Mask(const ShareBundle& bundle, const std::vector<Word>& input);
  // Round 3: checks U_3 and signs it.
  ConsistencySignature Check(const SurvivorList& list);
  // Round 4: checks the request against the U_3 this client signed and the
  // others' signatures on it; reveals b_{v,u} for neighbours v in U_3 and
  // s_{v,u}^SK for neighbours in U_2 \ U_3, never both for one v.
  UnmaskResponse Unmask(const UnmaskRequest& request);

 private:
  enum class Phase { kAdvertise, kShare, kMask, kCheck, kUnmask, kDone, kAborted };
  void Expect(Phase phase, const char* round);
  [[noreturn]] void Abort(const std::string& why);

  SessionConfig config_;
  int64_t id_;
  Bytes signing_key_;
  Phase phase_ = Phase::kAdvertise;
  RoundParams params_;
  KeyPair cipher_keys_, mask_keys_;
  Bytes self_mask_seed_;                      // b_u
  std::vector<int64_t> clients_;              // U_1
  std::map<int64_t, AdvertiseKeys> peers_;    // N(u): their keys
  std::map<int64_t, Bytes> share_keys_;       // N(u): the pair's AES-GCM key
  std::map<int64_t, Bytes> received_;         // N(u) ∩ U_2: e_{v,u}
  std::vector<int64_t> survivors_;            // U_3 as signed
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_CLIENT_H_
