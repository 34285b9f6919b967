#ifndef FEDPROF_SECAGG_WIRE_H_
#define FEDPROF_SECAGG_WIRE_H_

// Translation between the secure-aggregation messages (messages.h) and
// their wire form (proto/secagg.proto). FromWire checks what the format
// fixes — every key, signature, share and ciphertext size, id ranges,
// counts against the session's bounds, words in whole 16-byte units — and
// throws fedprof::Error naming `origin` and the field; what depends on the
// session's state (who is a neighbour, which kind of share) the state
// machines check.

#include <cstddef>
#include <string>
#include <vector>

#include "fedprof/secagg/messages.h"
#include "secagg.pb.h"

namespace fedprof::secagg {

namespace pb = ::fedprof::secagg::v1;

// The most clients one session may hold, and so the longest list any
// message may carry.
constexpr size_t kMaxSessionClients = 100000;

pb::AdvertiseKeys ToWire(const AdvertiseKeys& m);
AdvertiseKeys FromWire(const pb::AdvertiseKeys& m, const std::string& origin);
pb::Roster ToWire(const Roster& m);
Roster FromWire(const pb::Roster& m, const std::string& origin);
pb::RosterSignature ToWire(const RosterSignature& m);
RosterSignature FromWire(const pb::RosterSignature& m, const std::string& origin);
pb::KeyDirectory ToWire(const KeyDirectory& m);
KeyDirectory FromWire(const pb::KeyDirectory& m, const std::string& origin);
pb::ShareKeys ToWire(const ShareKeys& m);
ShareKeys FromWire(const pb::ShareKeys& m, const std::string& origin);
pb::ShareBundle ToWire(const ShareBundle& m);
ShareBundle FromWire(const pb::ShareBundle& m, const std::string& origin);
pb::SurvivorList ToWire(const SurvivorList& m);
SurvivorList FromWire(const pb::SurvivorList& m, const std::string& origin);
pb::ConsistencySignature ToWire(const ConsistencySignature& m);
ConsistencySignature FromWire(const pb::ConsistencySignature& m, const std::string& origin);
pb::UnmaskRequest ToWire(const UnmaskRequest& m);
UnmaskRequest FromWire(const pb::UnmaskRequest& m, const std::string& origin);
pb::UnmaskResponse ToWire(const UnmaskResponse& m);
UnmaskResponse FromWire(const pb::UnmaskResponse& m, const std::string& origin);

// A masked input in chunks of at most `chunk_words` words of `word_bytes`
// bytes each (the session's word_bits / 8; a word must fit in them).
std::vector<pb::MaskedInputChunk> ToWire(const MaskedInput& m, size_t chunk_words,
                                         size_t word_bytes = sizeof(Word));

// Reassembles a masked input as its chunks arrive: they must come in order,
// from one client, and make exactly the session's `length` words, so
// nothing beyond that is ever buffered. Add throws fedprof::Error at the
// first chunk that breaks this; Finish once the words are incomplete.
class MaskedInputAssembler {
 public:
  MaskedInputAssembler(size_t length, std::string origin, size_t word_bytes = sizeof(Word));
  void Add(const pb::MaskedInputChunk& chunk);
  bool complete() const { return input_.masked.size() == length_ && started_; }
  MaskedInput Finish();

 private:
  size_t length_;
  std::string origin_;
  size_t word_bytes_;
  bool started_ = false;
  MaskedInput input_;
};

}  // namespace fedprof::secagg

#endif  // FEDPROF_SECAGG_WIRE_H_
