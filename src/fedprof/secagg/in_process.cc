#include "fedprof/secagg/in_process.h"

#include <ctime>
#include <memory>
#include <type_traits>

#include "fedprof/core/error.h"
#include "fedprof/secagg/shamir.h"
#include "fedprof/secagg/wire.h"

namespace fedprof::secagg {
namespace {

// CPU seconds of the calling thread: what a party's own work costs, however
// busy the machine is with others.
double ThreadSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A message the server refused to decode (its sender is excluded).
struct Refused {};

// Times a party's work.
class Stopwatch {
 public:
  explicit Stopwatch(PartyCost& cost) : cost_(cost), start_(ThreadSeconds()) {}
  ~Stopwatch() { cost_.seconds += ThreadSeconds() - start_; }

 private:
  PartyCost& cost_;
  double start_;
};

// A message through its wire form: encoded, counted on both ends, parsed
// and checked as a receiver would.
template <typename Message>
Message Carry(const Message& message, PartyCost& from, PartyCost& to, const std::string& origin) {
  const auto wire = ToWire(message);
  std::string bytes;
  if (!wire.SerializeToString(&bytes)) throw Error("secagg: could not encode a message");
  from.bytes_sent += static_cast<int64_t>(bytes.size());
  to.bytes_received += static_cast<int64_t>(bytes.size());
  std::decay_t<decltype(wire)> parsed;
  if (!parsed.ParseFromString(bytes)) throw Error(origin + ": a message that does not parse");
  return FromWire(parsed, origin);
}

MaskedInput CarryMasked(const MaskedInput& message, size_t length, PartyCost& from, PartyCost& to,
                        const std::string& origin) {
  MaskedInputAssembler assembler(length, origin);
  for (const pb::MaskedInputChunk& chunk : ToWire(message, kChunkWords)) {
    std::string bytes;
    chunk.SerializeToString(&bytes);
    from.bytes_sent += static_cast<int64_t>(bytes.size());
    to.bytes_received += static_cast<int64_t>(bytes.size());
    pb::MaskedInputChunk parsed;
    if (!parsed.ParseFromString(bytes)) throw Error(origin + ": a chunk that does not parse");
    assembler.Add(parsed);
  }
  return assembler.Finish();
}

}  // namespace

ClientTraffic TrafficOfOneClient(int n, int k, int quorum, size_t length, size_t chunk_words) {
  const int64_t me = n / 2;
  const auto peer = [&](int i) { return (me + 1 + i) % n; };
  const auto bytes = [](const auto& message) { return static_cast<int64_t>(ToWire(message).ByteSizeLong()); };
  const Bytes key(kKeyBytes, '\0'), signature(kSignatureBytes, '\0');
  AdvertiseKeys advertise{me, key, key, Bytes(kCommitmentBytes, '\0'), signature};
  ShareKeys shares{me, Bytes(kCommitmentBytes, '\0'), {}};
  ShareBundle bundle;
  Roster roster;
  KeyDirectory directory;
  UnmaskResponse unmask{me, {}, {}};
  for (int i = 0; i < k; ++i) {
    const SealedShares sealed{peer(i), Bytes(SealedSize(kSharePlaintextBytes), '\0')};
    shares.shares.push_back(sealed);
    bundle.shares.push_back(sealed);
    directory.peers.push_back(advertise);
    directory.peers.back().client = peer(i);
    directory.roster_signatures.push_back(signature);
    unmask.shares.push_back(RevealedShare{peer(i), ShareKind::kSelfMask, Bytes(kShareBytes, '\0')});
  }
  SurvivorList survivors;
  UnmaskRequest request;
  for (int64_t id = 0; id < n; ++id) {
    roster.clients.push_back(id);
    roster.commitments.push_back(Bytes(kCommitmentBytes, '\0'));
    directory.graph_nonces.push_back(key);
    survivors.survivors.push_back(id);
    if (id < quorum) request.signatures.push_back(ConsistencySignature{id, signature});
  }
  request.survivors = survivors.survivors;
  ClientTraffic t;
  t.sent = bytes(advertise) + bytes(RosterSignature{me, signature, key}) + bytes(shares) +
           bytes(ConsistencySignature{me, signature}) + bytes(unmask);
  MaskedInput masked{me, std::vector<Word>(length, ~Word{0})};
  for (const pb::MaskedInputChunk& chunk : ToWire(masked, chunk_words)) {
    t.sent += static_cast<int64_t>(chunk.ByteSizeLong());
  }
  t.received = bytes(roster) + bytes(directory) + bytes(bundle) + bytes(survivors) + bytes(request);
  return t;
}

SessionReport RunInProcess(const SessionConfig& config, const std::map<int64_t, Bytes>& signing_keys,
                           const std::map<int64_t, std::vector<Word>>& inputs,
                           const Dropouts& dropouts, const Interceptors& interceptors,
                           bool keep_snapshots) {
  SessionReport report;
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  for (const auto& [id, input] : inputs) {
    (void)input;
    auto key = signing_keys.find(id);
    if (key == signing_keys.end()) throw Error("secagg: no signing key for client " + std::to_string(id));
    clients[id] = std::make_unique<SecAggClient>(config, id, key->second);
    report.clients[id];
  }
  SecAggServer server(config);
  const auto origin = [](int64_t id) { return "secagg client " + std::to_string(id); };
  // What a client sends, decoded by the server: a message that does not
  // decode excludes its sender (the server's refusal, not the client's).
  auto up = [&](int64_t id, const auto& message) {
    try {
      return Carry(message, report.clients[id], report.server, origin(id));
    } catch (const Error& e) {
      server.Refuse(id, e.what());
      throw Refused{};
    }
  };
  // A client that aborts stops answering, as a dropout does.
  auto run = [&](int64_t id, auto&& step) {
    if (report.aborted.count(id) != 0) return false;
    try {
      Stopwatch watch(report.clients[id]);
      step(*clients[id]);
      return true;
    } catch (const Error& e) {
      report.aborted[id] = e.what();
      return false;
    } catch (const Refused&) {
      return false;
    }
  };

  // Round 0: AdvertiseKeys.
  for (const auto& entry : clients) {
    const int64_t id = entry.first;
    run(id, [&](SecAggClient& c) {
      const AdvertiseKeys m = up(id, c.Advertise());
      Stopwatch watch(report.server);
      server.ReceiveAdvertise(id, m);
    });
  }
  report.params = server.params();
  Roster roster;
  {
    Stopwatch watch(report.server);
    roster = server.CloseAdvertise();
  }
  // Round 0′: RosterSignature.
  for (int64_t id : roster.clients) {
    if (dropouts.before_roster.count(id) != 0 || clients.count(id) == 0) continue;
    run(id, [&](SecAggClient& c) {
      Roster mine = roster;
      if (interceptors.roster) interceptors.roster(id, mine);
      const Roster r = Carry(mine, report.server, report.clients[id], "secagg server");
      const RosterSignature m = up(id, c.SignRoster(r));
      Stopwatch watch(report.server);
      server.ReceiveRosterSignature(id, m);
    });
  }
  std::map<int64_t, KeyDirectory> directories;
  {
    Stopwatch watch(report.server);
    directories = server.CloseRoster();
  }
  // Round 1: ShareKeys.
  for (auto& entry : directories) {
    const int64_t id = entry.first;
    KeyDirectory& directory = entry.second;
    if (dropouts.before_shares.count(id) != 0) continue;
    run(id, [&](SecAggClient& c) {
      if (interceptors.key_directory) interceptors.key_directory(id, directory);
      const KeyDirectory d = Carry(directory, report.server, report.clients[id], "secagg server");
      ShareKeys out = c.Share(d);
      if (interceptors.share_keys) interceptors.share_keys(out);
      const ShareKeys m = up(id, out);
      Stopwatch watch(report.server);
      server.ReceiveShares(id, m);
    });
  }
  std::map<int64_t, ShareBundle> bundles;
  {
    Stopwatch watch(report.server);
    bundles = server.CloseShares();
  }
  // Round 2: MaskedInputCollection.
  for (auto& entry : bundles) {
    const int64_t id = entry.first;
    ShareBundle& bundle = entry.second;
    if (dropouts.before_masked_input.count(id) != 0) continue;
    run(id, [&](SecAggClient& c) {
      if (interceptors.share_bundle) interceptors.share_bundle(id, bundle);
      const ShareBundle b = Carry(bundle, report.server, report.clients[id], "secagg server");
      const MaskedInput y = c.Mask(b, inputs.at(id));
      MaskedInput m;
      try {
        m = CarryMasked(y, config.length, report.clients[id], report.server, origin(id));
      } catch (const Error& e) {
        server.Refuse(id, e.what());
        throw Refused{};
      }
      Stopwatch watch(report.server);
      const bool taken = server.ReceiveMasked(id, m);
      if (keep_snapshots && taken) {
        report.masked_inputs.push_back(m);
        report.buffer_snapshots.push_back(server.aggregation_buffer());
      }
    });
  }
  SurvivorList survivors;
  {
    Stopwatch watch(report.server);
    survivors = server.CloseMasked();
  }
  // Round 3: ConsistencyCheck.
  for (int64_t id : survivors.survivors) {
    if (dropouts.after_masked_input.count(id) != 0) continue;
    run(id, [&](SecAggClient& c) {
      const SurvivorList s = Carry(survivors, report.server, report.clients[id], "secagg server");
      const ConsistencySignature m = up(id, c.Check(s));
      Stopwatch watch(report.server);
      server.ReceiveSignature(id, m);
    });
  }
  UnmaskRequest request;
  {
    Stopwatch watch(report.server);
    request = server.CloseConsistency();
  }
  // Round 4: Unmasking, asked of every client of U_4.
  for (const int64_t id : server.signers()) {
    if (dropouts.before_unmasking.count(id) != 0) continue;
    run(id, [&](SecAggClient& c) {
      UnmaskRequest mine = request;
      if (interceptors.unmask_request) interceptors.unmask_request(id, mine);
      const UnmaskRequest r = Carry(mine, report.server, report.clients[id], "secagg server");
      UnmaskResponse out = c.Unmask(r);
      if (interceptors.unmask_response) interceptors.unmask_response(out);
      const UnmaskResponse m = up(id, out);
      Stopwatch watch(report.server);
      server.ReceiveUnmask(id, m);
    });
  }
  {
    Stopwatch watch(report.server);
    report.result = server.Finish();
  }
  report.excluded = server.excluded();
  return report;
}

}  // namespace fedprof::secagg
