// Secure-aggregation messages (proto/secagg.proto, secagg/wire.h) as a
// transport decodes them, and the state machines that then read them.
// Input: a selector byte, then
//   0..7: one message — AdvertiseKeys, KeyDirectory, ShareKeys, ShareBundle,
//         SurvivorList, ConsistencySignature, UnmaskRequest, UnmaskResponse —
//         through FromWire, and what decodes back through ToWire to the same
//         message;
//   8:    a masked input as the server reassembles it: messages of 2-byte
//         little-endian length + MaskedInputChunk bytes, for 8 words;
//   9:    an UnmaskRequest given to an honest client at round 4 of a
//         4-client session (it must answer or refuse with an Error);
//   10:   an UnmaskResponse from client 0 of that session to the server,
//         the other clients answering honestly: Finish must return the
//         exact sum of the inputs or fail the round, never another sum;
//   11:   a task's SecAggSetup (proto/federation.proto) as a client checks
//         it, and what it accepts back through SetupToWire;
//   12:   a SecAggRequest from client 0 to the server's side of a
//         deployment's session (deploy/server/secagg_sessions.h), which must
//         answer it exactly once;
//   13, 14: a Roster, a RosterSignature, through FromWire and back;
//   15:   a Roster given to an honest client at round 0′ of that session:
//         it signs only a U_1 of invited clients holding its own
//         commitment, no smaller than its tolerance allows;
//   16:   a KeyDirectory given to an honest client at round 1: it shares
//         its secrets only with the neighbours the committed nonces give.

#include <memory>

#include "fedprof/deploy/server/secagg_sessions.h"
#include "fedprof/secagg/client.h"
#include "fedprof/secagg/server.h"
#include "fedprof/secagg/wire.h"
#include "fuzz/fuzz_common.h"

namespace {

using namespace fedprof::secagg;

std::vector<std::string> Frames(const uint8_t* data, size_t size) {
  std::vector<std::string> frames;
  while (size >= 2) {
    const size_t n = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
    frames.emplace_back(reinterpret_cast<const char*>(data + 2), n);
    data += 2 + n;
    size -= 2 + n;
  }
  return frames;
}

// Decodes `bytes` as Wire, and checks that what FromWire accepts encodes
// back to a message that decodes to the same bytes again.
template <typename Wire>
void RoundTrip(const std::string& bytes) {
  Wire wire;
  if (!wire.ParseFromString(bytes)) return;
  const auto decoded = FromWire(wire, "fuzz");
  std::string once, twice;
  ToWire(decoded).SerializeToString(&once);
  Wire again;
  FUZZ_CHECK(again.ParseFromString(once), "re-encoded message does not parse");
  ToWire(FromWire(again, "fuzz")).SerializeToString(&twice);
  FUZZ_CHECK(once == twice, "message did not round-trip");
}

// A 4-client SecAgg session (t = 2, no corrupt clients assumed) run
// honestly up to round 4, or only to round 0′ or 1.
struct Session {
  enum class Until { kRoster, kDirectory, kUnmask };
  SessionConfig config;
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  std::unique_ptr<SecAggServer> server;
  Roster roster;
  std::map<int64_t, KeyDirectory> directories;
  UnmaskRequest request;
  std::vector<Word> expected;

  explicit Session(Until until = Until::kUnmask) {
    config.run_id = RandomBytes(kKeyBytes);
    config.nonce = RandomBytes(kKeyBytes);
    config.protocol = Protocol::kSecAgg;
    config.tolerance.corrupt = 0;
    config.length = 3;
    std::map<int64_t, Bytes> signing;
    for (int64_t id = 0; id < 4; ++id) {
      const KeyPair k = GenerateEd25519();
      config.verify_keys[id] = k.public_key;
      signing[id] = k.secret;
    }
    config.graph = ParamsFor(config).graph;
    server = std::make_unique<SecAggServer>(config);
    for (int64_t id = 0; id < 4; ++id) {
      clients[id] = std::make_unique<SecAggClient>(config, id, signing[id]);
      server->ReceiveAdvertise(id, clients[id]->Advertise());
    }
    roster = server->CloseAdvertise();
    if (until == Until::kRoster) return;
    for (auto& [id, c] : clients) server->ReceiveRosterSignature(id, c->SignRoster(roster));
    directories = server->CloseRoster();
    if (until == Until::kDirectory) return;
    for (auto& [id, d] : directories) server->ReceiveShares(id, clients[id]->Share(d));
    expected.assign(config.length, 0);
    for (auto& [id, b] : server->CloseShares()) {
      const std::vector<Word> x = {Word(id) * 1000, ~Word(id), Word(7)};
      for (size_t i = 0; i < x.size(); ++i) expected[i] += x[i];
      server->ReceiveMasked(id, clients[id]->Mask(b, x));
    }
    const SurvivorList u3 = server->CloseMasked();
    for (int64_t id : u3.survivors) server->ReceiveSignature(id, clients[id]->Check(u3));
    request = server->CloseConsistency();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body = fedprof::fuzz::Bytes(data + 1, size - 1);
  return fedprof::fuzz::Run([&] {
    switch (data[0]) {
      case 0: RoundTrip<pb::AdvertiseKeys>(body); break;
      case 1: RoundTrip<pb::KeyDirectory>(body); break;
      case 2: RoundTrip<pb::ShareKeys>(body); break;
      case 3: RoundTrip<pb::ShareBundle>(body); break;
      case 4: RoundTrip<pb::SurvivorList>(body); break;
      case 5: RoundTrip<pb::ConsistencySignature>(body); break;
      case 6: RoundTrip<pb::UnmaskRequest>(body); break;
      case 7: RoundTrip<pb::UnmaskResponse>(body); break;
      case 8: {
        MaskedInputAssembler assembler(8, "fuzz");
        for (const std::string& frame : Frames(data + 1, size - 1)) {
          pb::MaskedInputChunk chunk;
          if (!chunk.ParseFromString(frame)) return;
          assembler.Add(chunk);
        }
        const MaskedInput m = assembler.Finish();
        FUZZ_CHECK(m.masked.size() == 8, "a masked input of the wrong length");
        break;
      }
      case 9: {
        pb::UnmaskRequest wire;
        if (!wire.ParseFromString(body)) return;
        Session s;
        const UnmaskResponse r = s.clients[1]->Unmask(FromWire(wire, "fuzz"));
        // An honest client reveals one share per neighbour, never both kinds.
        FUZZ_CHECK(r.shares.size() + r.complaints.size() == 3, "not one share per neighbour");
        break;
      }
      case 10: {
        pb::UnmaskResponse wire;
        if (!wire.ParseFromString(body)) return;
        Session s;
        s.server->ReceiveUnmask(0, FromWire(wire, "fuzz"));
        for (int64_t id = 1; id < 4; ++id) {
          s.server->ReceiveUnmask(id, s.clients[id]->Unmask(s.request));
        }
        FUZZ_CHECK(s.server->Finish().sum == s.expected, "a wrong sum");
        break;
      }
      case 11: {
        fedprof::federation::v1::SecAggSetup wire;
        if (!wire.ParseFromString(body)) return;
        const fedprof::SecAggPolicy policy;
        const SessionConfig config = fedprof::SetupFromWire(wire, 2, 0, 1, policy);
        const SessionConfig again =
            fedprof::SetupFromWire(fedprof::SetupToWire(config, wire.reply_wait_s()), 2, 0, 1, policy);
        FUZZ_CHECK(again.verify_keys == config.verify_keys && SessionId(again) == SessionId(config),
                   "a setup that does not round-trip");
        break;
      }
      case 12: {
        fedprof::federation::v1::SecAggRequest request;
        if (!request.ParseFromString(body)) return;
        SessionConfig config;
        config.run_id = Bytes(kKeyBytes, 7);
        config.nonce = Bytes(kKeyBytes, 9);
        config.length = 3;
        for (int64_t id = 0; id < 3; ++id) config.verify_keys[id] = Bytes(kKeyBytes, static_cast<uint8_t>(id + 1));
        config.graph = ParamsFor(config).graph;
        fedprof::federation::v1::SecAggReply reply;
        int answered = 0;
        {
          fedprof::SecAggRendezvous session(config, {{0, 1}, {1, 2}, {2, 3}}, 1);
          for (int64_t id = 0; id < 3; ++id) session.Admit(id);
          session.Take(0, request, fedprof::HeldReply{&reply, [&] { ++answered; }});
        }
        FUZZ_CHECK(answered == 1, "a request answered other than once");
        break;
      }
      case 13: RoundTrip<pb::Roster>(body); break;
      case 14: RoundTrip<pb::RosterSignature>(body); break;
      case 15: {
        pb::Roster wire;
        if (!wire.ParseFromString(body)) return;
        Session s(Session::Until::kRoster);
        const Roster roster = FromWire(wire, "fuzz");
        s.clients[1]->SignRoster(roster);
        // Signed: this client's own commitment in a U_1 of invited clients,
        // all of them (no dropout is tolerated among 4).
        FUZZ_CHECK(roster.clients.size() == 4 && roster.commitments[1] == s.roster.commitments[1],
                   "signed a roster it must refuse");
        break;
      }
      case 16: {
        pb::KeyDirectory wire;
        if (!wire.ParseFromString(body)) return;
        Session s(Session::Until::kDirectory);
        const KeyDirectory d = FromWire(wire, "fuzz");
        s.clients[1]->Share(d);
        // Shared: the committed nonces, and the neighbours' own keys.
        FUZZ_CHECK(d.graph_nonces == s.directories[1].graph_nonces, "shared under another graph seed");
        for (size_t i = 0; i < d.peers.size(); ++i) {
          FUZZ_CHECK(d.peers[i].mask_public == s.directories[1].peers[i].mask_public,
                     "shared with keys their owners did not sign");
        }
        break;
      }
      default: break;
    }
  });
}
