#include "fedprof/secagg/wire.h"

#include <cstring>

#include "fedprof/core/error.h"
#include "fedprof/secagg/shamir.h"

namespace fedprof::secagg {
namespace {

constexpr size_t kWordBytes = sizeof(Word);

[[noreturn]] void Bad(const std::string& origin, const std::string& what) {
  throw Error(origin + ": " + what);
}

int64_t Id(int64_t id, const std::string& origin, const char* field) {
  if (id < 0) Bad(origin, std::string(field) + " is a negative client id");
  return id;
}

Bytes Sized(const std::string& bytes, size_t size, const std::string& origin, const char* field) {
  if (bytes.size() != size) {
    Bad(origin, std::string(field) + " of " + std::to_string(bytes.size()) + " bytes, expected " +
                    std::to_string(size));
  }
  return bytes;
}

template <typename Repeated>
void Count(const Repeated& list, const std::string& origin, const char* field) {
  if (static_cast<size_t>(list.size()) > kMaxSessionClients) {
    Bad(origin, std::string(field) + " lists " + std::to_string(list.size()) +
                    " entries, more than " + std::to_string(kMaxSessionClients));
  }
}

std::vector<int64_t> Ids(const google::protobuf::RepeatedField<int64_t>& ids,
                         const std::string& origin, const char* field) {
  Count(ids, origin, field);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(ids.size()));
  for (int64_t id : ids) out.push_back(Id(id, origin, field));
  return out;
}

template <typename Message>
void PutIds(const std::vector<int64_t>& ids, Message* out,
            void (Message::*add)(int64_t)) {
  for (int64_t id : ids) (out->*add)(id);
}

pb::SealedShares SharesToWire(const SealedShares& s) {
  pb::SealedShares out;
  out.set_peer(s.peer);
  out.set_sealed(s.sealed);
  return out;
}

SealedShares SharesFromWire(const pb::SealedShares& s, const std::string& origin) {
  return {Id(s.peer(), origin, "peer"),
          Sized(s.sealed(), SealedSize(kSharePlaintextBytes), origin, "encrypted shares")};
}

}  // namespace

pb::AdvertiseKeys ToWire(const AdvertiseKeys& m) {
  pb::AdvertiseKeys out;
  out.set_client(m.client);
  out.set_cipher_public(m.cipher_public);
  out.set_mask_public(m.mask_public);
  out.set_signature(m.signature);
  out.set_graph_commitment(m.graph_commitment);
  return out;
}

AdvertiseKeys FromWire(const pb::AdvertiseKeys& m, const std::string& origin) {
  return {Id(m.client(), origin, "client"),
          Sized(m.cipher_public(), kKeyBytes, origin, "cipher public key"),
          Sized(m.mask_public(), kKeyBytes, origin, "mask public key"),
          Sized(m.graph_commitment(), kCommitmentBytes, origin, "graph commitment"),
          Sized(m.signature(), kSignatureBytes, origin, "signature")};
}

pb::Roster ToWire(const Roster& m) {
  pb::Roster out;
  PutIds(m.clients, &out, &pb::Roster::add_clients);
  for (const Bytes& c : m.commitments) out.add_commitments(c);
  return out;
}

Roster FromWire(const pb::Roster& m, const std::string& origin) {
  Roster out;
  out.clients = Ids(m.clients(), origin, "clients");
  if (m.commitments_size() != m.clients_size()) {
    Bad(origin, std::to_string(m.commitments_size()) + " graph commitments for " +
                    std::to_string(m.clients_size()) + " clients");
  }
  for (const std::string& c : m.commitments()) {
    out.commitments.push_back(Sized(c, kCommitmentBytes, origin, "graph commitment"));
  }
  return out;
}

pb::RosterSignature ToWire(const RosterSignature& m) {
  pb::RosterSignature out;
  out.set_client(m.client);
  out.set_signature(m.signature);
  out.set_graph_nonce(m.graph_nonce);
  return out;
}

RosterSignature FromWire(const pb::RosterSignature& m, const std::string& origin) {
  return {Id(m.client(), origin, "client"), Sized(m.signature(), kSignatureBytes, origin, "signature"),
          Sized(m.graph_nonce(), kKeyBytes, origin, "graph nonce")};
}

pb::KeyDirectory ToWire(const KeyDirectory& m) {
  pb::KeyDirectory out;
  for (const Bytes& r : m.graph_nonces) out.add_graph_nonces(r);
  for (const AdvertiseKeys& p : m.peers) *out.add_peers() = ToWire(p);
  for (const Bytes& s : m.roster_signatures) out.add_roster_signatures(s);
  return out;
}

KeyDirectory FromWire(const pb::KeyDirectory& m, const std::string& origin) {
  KeyDirectory out;
  Count(m.graph_nonces(), origin, "graph nonces");
  for (const std::string& r : m.graph_nonces()) {
    out.graph_nonces.push_back(Sized(r, kKeyBytes, origin, "graph nonce"));
  }
  Count(m.peers(), origin, "peers");
  for (const pb::AdvertiseKeys& p : m.peers()) out.peers.push_back(FromWire(p, origin));
  if (m.roster_signatures_size() != m.peers_size()) {
    Bad(origin, std::to_string(m.roster_signatures_size()) + " roster signatures for " +
                    std::to_string(m.peers_size()) + " peers");
  }
  for (const std::string& s : m.roster_signatures()) {
    out.roster_signatures.push_back(Sized(s, kSignatureBytes, origin, "roster signature"));
  }
  return out;
}

pb::ShareKeys ToWire(const ShareKeys& m) {
  pb::ShareKeys out;
  out.set_client(m.client);
  out.set_self_mask_commitment(m.self_mask_commitment);
  for (const SealedShares& s : m.shares) *out.add_shares() = SharesToWire(s);
  return out;
}

ShareKeys FromWire(const pb::ShareKeys& m, const std::string& origin) {
  ShareKeys out;
  out.client = Id(m.client(), origin, "client");
  out.self_mask_commitment =
      Sized(m.self_mask_commitment(), kCommitmentBytes, origin, "self-mask commitment");
  Count(m.shares(), origin, "shares");
  for (const pb::SealedShares& s : m.shares()) out.shares.push_back(SharesFromWire(s, origin));
  return out;
}

pb::ShareBundle ToWire(const ShareBundle& m) {
  pb::ShareBundle out;
  for (const SealedShares& s : m.shares) *out.add_shares() = SharesToWire(s);
  return out;
}

ShareBundle FromWire(const pb::ShareBundle& m, const std::string& origin) {
  ShareBundle out;
  Count(m.shares(), origin, "shares");
  for (const pb::SealedShares& s : m.shares()) out.shares.push_back(SharesFromWire(s, origin));
  return out;
}

pb::SurvivorList ToWire(const SurvivorList& m) {
  pb::SurvivorList out;
  PutIds(m.survivors, &out, &pb::SurvivorList::add_survivors);
  return out;
}

SurvivorList FromWire(const pb::SurvivorList& m, const std::string& origin) {
  return {Ids(m.survivors(), origin, "survivors")};
}

pb::ConsistencySignature ToWire(const ConsistencySignature& m) {
  pb::ConsistencySignature out;
  out.set_client(m.client);
  out.set_signature(m.signature);
  return out;
}

ConsistencySignature FromWire(const pb::ConsistencySignature& m, const std::string& origin) {
  return {Id(m.client(), origin, "client"),
          Sized(m.signature(), kSignatureBytes, origin, "signature")};
}

pb::UnmaskRequest ToWire(const UnmaskRequest& m) {
  pb::UnmaskRequest out;
  PutIds(m.survivors, &out, &pb::UnmaskRequest::add_survivors);
  PutIds(m.dropped, &out, &pb::UnmaskRequest::add_dropped);
  for (const ConsistencySignature& s : m.signatures) *out.add_signatures() = ToWire(s);
  return out;
}

UnmaskRequest FromWire(const pb::UnmaskRequest& m, const std::string& origin) {
  UnmaskRequest out;
  out.survivors = Ids(m.survivors(), origin, "survivors");
  out.dropped = Ids(m.dropped(), origin, "dropped");
  Count(m.signatures(), origin, "signatures");
  for (const pb::ConsistencySignature& s : m.signatures()) {
    out.signatures.push_back(FromWire(s, origin));
  }
  return out;
}

pb::UnmaskResponse ToWire(const UnmaskResponse& m) {
  pb::UnmaskResponse out;
  out.set_client(m.client);
  for (const RevealedShare& s : m.shares) {
    pb::RevealedShare* r = out.add_shares();
    r->set_owner(s.owner);
    r->set_kind(s.kind == ShareKind::kSelfMask ? pb::SELF_MASK : pb::MASK_KEY);
    r->set_value(s.value);
  }
  for (const Complaint& c : m.complaints) out.add_complaints(c.owner);
  return out;
}

UnmaskResponse FromWire(const pb::UnmaskResponse& m, const std::string& origin) {
  UnmaskResponse out;
  out.client = Id(m.client(), origin, "client");
  Count(m.shares(), origin, "shares");
  for (const pb::RevealedShare& s : m.shares()) {
    if (s.kind() != pb::SELF_MASK && s.kind() != pb::MASK_KEY) {
      Bad(origin, "share kind " + std::to_string(static_cast<int>(s.kind())) + " is unknown");
    }
    out.shares.push_back({Id(s.owner(), origin, "share owner"),
                          s.kind() == pb::SELF_MASK ? ShareKind::kSelfMask : ShareKind::kMaskKey,
                          Sized(s.value(), kShareBytes, origin, "share")});
  }
  for (int64_t owner : Ids(m.complaints(), origin, "complaints")) out.complaints.push_back({owner});
  return out;
}

std::vector<pb::MaskedInputChunk> ToWire(const MaskedInput& m, size_t chunk_words, size_t word_bytes) {
  if (chunk_words == 0) throw Error("secagg: chunks of 0 words");
  if (word_bytes == 0 || word_bytes > kWordBytes) throw Error("secagg: words of " + std::to_string(word_bytes) + " bytes");
  const Word fits = WordMask(static_cast<int>(8 * word_bytes));
  std::vector<pb::MaskedInputChunk> out;
  for (size_t at = 0; at < m.masked.size(); at += chunk_words) {
    const size_t n = std::min(chunk_words, m.masked.size() - at);
    pb::MaskedInputChunk& c = out.emplace_back();
    c.set_client(m.client);
    c.set_first_word(at);
    c.set_total_words(m.masked.size());
    std::string bytes(n * word_bytes, '\0');
    for (size_t i = 0; i < n; ++i) {
      Word w = m.masked[at + i];
      if ((w & fits) != w) throw Error("secagg: a masked word beyond " + std::to_string(word_bytes) + " bytes");
      for (size_t b = 0; b < word_bytes; ++b, w >>= 8) {
        bytes[i * word_bytes + b] = static_cast<char>(static_cast<unsigned char>(w & 0xff));
      }
    }
    c.set_words(std::move(bytes));
  }
  return out;
}

MaskedInputAssembler::MaskedInputAssembler(size_t length, std::string origin, size_t word_bytes)
    : length_(length), origin_(std::move(origin)), word_bytes_(word_bytes) {
  if (word_bytes_ == 0 || word_bytes_ > kWordBytes) {
    throw Error("secagg: words of " + std::to_string(word_bytes_) + " bytes");
  }
}

void MaskedInputAssembler::Add(const pb::MaskedInputChunk& c) {
  if (!started_) {
    input_.client = Id(c.client(), origin_, "client");
    started_ = true;
    input_.masked.reserve(length_);
  } else if (c.client() != input_.client) {
    Bad(origin_, "a masked-input chunk of client " + std::to_string(c.client()) +
                     " in client " + std::to_string(input_.client) + "'s input");
  }
  if (c.total_words() != length_) {
    Bad(origin_, "a masked input of " + std::to_string(c.total_words()) +
                     " words, the session's are " + std::to_string(length_));
  }
  if (c.first_word() != input_.masked.size()) {
    Bad(origin_, "a masked-input chunk at word " + std::to_string(c.first_word()) + ", expected " +
                     std::to_string(input_.masked.size()));
  }
  const std::string& bytes = c.words();
  if (bytes.empty() || bytes.size() % word_bytes_ != 0 ||
      bytes.size() / word_bytes_ > length_ - input_.masked.size()) {
    Bad(origin_, "a masked-input chunk of " + std::to_string(bytes.size()) +
                     " bytes, not whole words within the input");
  }
  for (size_t i = 0; i < bytes.size(); i += word_bytes_) {
    Word w = 0;
    for (size_t b = word_bytes_; b-- > 0;) w = (w << 8) | static_cast<unsigned char>(bytes[i + b]);
    input_.masked.push_back(w);
  }
}

MaskedInput MaskedInputAssembler::Finish() {
  if (!complete()) {
    Bad(origin_, "a masked input of " + std::to_string(input_.masked.size()) + " words, the " +
                     "session's are " + std::to_string(length_));
  }
  started_ = false;
  return std::move(input_);
}

}  // namespace fedprof::secagg
