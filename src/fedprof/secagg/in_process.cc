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

MaskedInput CarryMasked(const MaskedInput& message, const SessionConfig& config, PartyCost& from, PartyCost& to,
                        const std::string& origin) {
  const size_t word_bytes = static_cast<size_t>(config.word_bits / 8);
  MaskedInputAssembler assembler(config.length, origin, word_bytes);
  for (const pb::MaskedInputChunk& chunk : ToWire(message, kChunkWords, word_bytes)) {
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

ClientTraffic TrafficOfOneClient(int n, int k, int quorum, size_t length, size_t chunk_words, int word_bits) {
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
  MaskedInput masked{me, std::vector<Word>(length, WordMask(word_bits))};
  for (const pb::MaskedInputChunk& chunk : ToWire(masked, chunk_words, static_cast<size_t>(word_bits / 8))) {
    t.sent += static_cast<int64_t>(chunk.ByteSizeLong());
  }
  t.received = bytes(roster) + bytes(directory) + bytes(bundle) + bytes(survivors) + bytes(request);
  return t;
}

namespace {

// One session's parties, stepped through the rounds: each round's clients
// answer what the server sent them, then the server closes the round.
class Session {
 public:
  Session(const SessionConfig& config, const std::map<int64_t, Bytes>& signing_keys,
          const std::map<int64_t, std::vector<Word>>& inputs, const Dropouts& dropouts,
          const Interceptors& interceptors, bool keep_snapshots)
      : config_(config),
        inputs_(inputs),
        dropouts_(dropouts),
        interceptors_(interceptors),
        keep_snapshots_(keep_snapshots),
        clients_(MakeClients(config, signing_keys, inputs)),
        server_(config) {
    for (const auto& entry : clients_) report_.clients[entry.first];
  }

  // Round 0: AdvertiseKeys; U_1.
  Roster Advertise() {
    for (const auto& entry : clients_) {
      const int64_t id = entry.first;
      Run(id, [&](SecAggClient& c) {
        const AdvertiseKeys m = Up(id, c.Advertise());
        Stopwatch watch(report_.server);
        server_.ReceiveAdvertise(id, m);
      });
    }
    report_.params = server_.params();
    return OnServer([&] { return server_.CloseAdvertise(); });
  }

  // Round 0′: RosterSignature; each client's key directory.
  std::map<int64_t, KeyDirectory> SignRoster(const Roster& roster) {
    for (int64_t id : roster.clients) {
      if (dropouts_.before_roster.count(id) != 0 || clients_.count(id) == 0) continue;
      Run(id, [&](SecAggClient& c) {
        Roster mine = roster;
        if (interceptors_.roster) interceptors_.roster(id, mine);
        const Roster r = Down(mine, id);
        const RosterSignature m = Up(id, c.SignRoster(r));
        Stopwatch watch(report_.server);
        server_.ReceiveRosterSignature(id, m);
      });
    }
    return OnServer([&] { return server_.CloseRoster(); });
  }

  // Round 1: ShareKeys; each client's bundle of shares.
  std::map<int64_t, ShareBundle> Share(std::map<int64_t, KeyDirectory> directories) {
    for (auto& entry : directories) {
      const int64_t id = entry.first;
      KeyDirectory& directory = entry.second;
      if (dropouts_.before_shares.count(id) != 0) continue;
      Run(id, [&](SecAggClient& c) {
        if (interceptors_.key_directory) interceptors_.key_directory(id, directory);
        const KeyDirectory d = Down(directory, id);
        ShareKeys out = c.Share(d);
        if (interceptors_.share_keys) interceptors_.share_keys(out);
        const ShareKeys m = Up(id, out);
        Stopwatch watch(report_.server);
        server_.ReceiveShares(id, m);
      });
    }
    return OnServer([&] { return server_.CloseShares(); });
  }

  // Round 2: MaskedInputCollection; U_3.
  SurvivorList Mask(std::map<int64_t, ShareBundle> bundles) {
    for (auto& entry : bundles) {
      const int64_t id = entry.first;
      ShareBundle& bundle = entry.second;
      if (dropouts_.before_masked_input.count(id) != 0) continue;
      Run(id, [&](SecAggClient& c) {
        if (interceptors_.share_bundle) interceptors_.share_bundle(id, bundle);
        const ShareBundle b = Down(bundle, id);
        const MaskedInput y = c.Mask(b, inputs_.at(id));
        MaskedInput m;
        try {
          m = CarryMasked(y, config_, report_.clients[id], report_.server, Origin(id));
        } catch (const Error& e) {
          server_.Refuse(id, e.what());
          throw Refused{};
        }
        Stopwatch watch(report_.server);
        const bool taken = server_.ReceiveMasked(id, m);
        if (keep_snapshots_ && taken) {
          report_.masked_inputs.push_back(m);
          report_.buffer_snapshots.push_back(server_.aggregation_buffer());
        }
      });
    }
    return OnServer([&] { return server_.CloseMasked(); });
  }

  // Round 3: ConsistencyCheck; the unmasking request.
  UnmaskRequest Check(const SurvivorList& survivors) {
    for (int64_t id : survivors.survivors) {
      if (dropouts_.after_masked_input.count(id) != 0) continue;
      Run(id, [&](SecAggClient& c) {
        const SurvivorList s = Down(survivors, id);
        const ConsistencySignature m = Up(id, c.Check(s));
        Stopwatch watch(report_.server);
        server_.ReceiveSignature(id, m);
      });
    }
    return OnServer([&] { return server_.CloseConsistency(); });
  }

  // Round 4: Unmasking, asked of every client of U_4.
  void Unmask(const UnmaskRequest& request) {
    for (const int64_t id : server_.signers()) {
      if (dropouts_.before_unmasking.count(id) != 0) continue;
      Run(id, [&](SecAggClient& c) {
        UnmaskRequest mine = request;
        if (interceptors_.unmask_request) interceptors_.unmask_request(id, mine);
        const UnmaskRequest r = Down(mine, id);
        UnmaskResponse out = c.Unmask(r);
        if (interceptors_.unmask_response) interceptors_.unmask_response(out);
        const UnmaskResponse m = Up(id, out);
        Stopwatch watch(report_.server);
        server_.ReceiveUnmask(id, m);
      });
    }
  }

  // The sum, and what the session cost and excluded.
  SessionReport Finish() {
    report_.result = OnServer([&] { return server_.Finish(); });
    report_.excluded = server_.excluded();
    return std::move(report_);
  }

 private:
  // The clients of `inputs`, each with its signing key.
  static std::map<int64_t, std::unique_ptr<SecAggClient>> MakeClients(
      const SessionConfig& config, const std::map<int64_t, Bytes>& signing_keys,
      const std::map<int64_t, std::vector<Word>>& inputs) {
    std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
    for (const auto& entry : inputs) {
      const int64_t id = entry.first;
      auto key = signing_keys.find(id);
      if (key == signing_keys.end()) throw Error("secagg: no signing key for client " + std::to_string(id));
      clients[id] = std::make_unique<SecAggClient>(config, id, key->second);
    }
    return clients;
  }

  static std::string Origin(int64_t id) { return "secagg client " + std::to_string(id); }

  // What the server sends client `id`, as the client decodes it.
  template <typename Message>
  Message Down(const Message& message, int64_t id) {
    return Carry(message, report_.server, report_.clients[id], "secagg server");
  }

  // What a client sends, decoded by the server: a message that does not
  // decode excludes its sender (the server's refusal, not the client's).
  template <typename Message>
  Message Up(int64_t id, const Message& message) {
    try {
      return Carry(message, report_.clients[id], report_.server, Origin(id));
    } catch (const Error& e) {
      server_.Refuse(id, e.what());
      throw Refused{};
    }
  }

  // A client's step, timed. A client that aborts stops answering, as a
  // dropout does.
  template <typename Step>
  void Run(int64_t id, Step&& step) {
    if (report_.aborted.count(id) != 0) return;
    try {
      Stopwatch watch(report_.clients[id]);
      step(*clients_[id]);
    } catch (const Error& e) {
      report_.aborted[id] = e.what();
    } catch (const Refused&) {
    }
  }

  // The server's step that closes a round, timed.
  template <typename Close>
  auto OnServer(Close&& close) -> decltype(close()) {
    Stopwatch watch(report_.server);
    return close();
  }

  const SessionConfig& config_;
  const std::map<int64_t, std::vector<Word>>& inputs_;
  const Dropouts& dropouts_;
  const Interceptors& interceptors_;
  const bool keep_snapshots_;
  SessionReport report_;
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients_;
  SecAggServer server_;  // made after the clients: a missing key is named first
};

}  // namespace

SessionReport RunInProcess(const SessionConfig& config, const std::map<int64_t, Bytes>& signing_keys,
                           const std::map<int64_t, std::vector<Word>>& inputs,
                           const Dropouts& dropouts, const Interceptors& interceptors,
                           bool keep_snapshots) {
  Session session(config, signing_keys, inputs, dropouts, interceptors, keep_snapshots);
  const Roster roster = session.Advertise();
  std::map<int64_t, KeyDirectory> directories = session.SignRoster(roster);
  std::map<int64_t, ShareBundle> bundles = session.Share(std::move(directories));
  const SurvivorList survivors = session.Mask(std::move(bundles));
  const UnmaskRequest request = session.Check(survivors);
  session.Unmask(request);
  return session.Finish();
}

}  // namespace fedprof::secagg
