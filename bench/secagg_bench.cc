// Cost of secure aggregation (secagg/), SecAgg against SecAgg+, in process,
// one thread: each client's and the server's bytes on the wire (serialised
// protobuf, the masked input in 1 MiB chunks) and compute time for one
// session of K clients, K = 10, 50, 100, 500, with a LeNet-5-sized input
// (61,706 parameters + the weight word) and with a fraction of the clients
// dropping after sharing their keys (whose pairwise masks the server then
// removes). The sum is checked against the plain sum of the inputs. SecAgg+
// takes k and t from the default tolerance (δ = γ = 0.1, σ = 40, η = 20);
// SecAgg's t is the same rule on the complete graph. Prints a Markdown table.
//
//   secagg_bench [K ...]          (default: 10 50 100 500)
//   SECAGG_BENCH_DROPOUT=0.1      fraction dropping after ShareKeys (default 0 and 0.1)
//   secagg_bench --params         the parameters each client computes (k, t,
//                                 the floor on U_1 and U_3, the signature
//                                 quorum) and its messages and bytes, at
//                                 n = 100, 1,000, 10,000 and γ = 0.05, 0.1,
//                                 0.2 (δ = 0.1, σ = 40, η = 20), from the
//                                 messages' encodings (no session is run)
//   secagg_bench --distributed-dp [K ...]
//                                 a client's cost under distributed DP
//                                 against plain SecAgg+ (default K = 100):
//                                 the update's encoding (rotation, rounding,
//                                 discrete Gaussian noise for z = 1, C = 1,
//                                 32 bits) and its session of 65,536 words of
//                                 4 bytes, against a session of the model's
//                                 61,707 words of 16 bytes
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/secagg/in_process.h"

namespace {

using namespace fedprof::secagg;

constexpr size_t kLeNet5Params = 61706;

struct Row {
  double client_sent_kib = 0, client_received_kib = 0, client_ms = 0;
  double server_sent_mib = 0, server_received_mib = 0, server_s = 0;
  GraphParams graph;
};

Row Measure(Protocol protocol, int clients, double dropout, uint64_t seed,
            size_t length = kLeNet5Params + 1, int word_bits = 128) {
  SessionConfig config;
  config.run_id = RandomBytes(kKeyBytes);
  config.nonce = RandomBytes(kKeyBytes);
  config.protocol = protocol;
  config.length = length;
  config.word_bits = word_bits;
  std::map<int64_t, Bytes> signing;
  std::map<int64_t, std::vector<Word>> inputs;
  std::mt19937_64 rng(seed);
  std::vector<Word> expected(config.length, 0);
  Dropouts dropouts;
  const int dropped = static_cast<int>(dropout * clients);
  for (int i = 0; i < clients; ++i) {
    const KeyPair k = GenerateEd25519();
    config.verify_keys[i] = k.public_key;
    signing[i] = k.secret;
    std::vector<Word>& x = inputs[i];
    for (size_t j = 0; j < config.length; ++j) x.push_back(((Word{rng()} << 64) | rng()) & WordMask(word_bits));
    // Spread the dropouts over the ring.
    if (dropped > 0 && i % (clients / dropped) == 0 &&
        static_cast<int>(dropouts.before_masked_input.size()) < dropped) {
      dropouts.before_masked_input.insert(i);
    } else {
      for (size_t j = 0; j < config.length; ++j) expected[j] = (expected[j] + x[j]) & WordMask(word_bits);
    }
  }
  // Under the dropout fraction the tolerance's δ must cover it.
  config.tolerance.dropout = std::max(config.tolerance.dropout, dropout);
  config.graph = ParamsFor(config).graph;
  const SessionReport report = RunInProcess(config, signing, inputs, dropouts);
  if (report.result.sum != expected) throw fedprof::Error("secagg_bench: the sum is wrong");
  Row row;
  row.graph = config.graph;
  int answering = 0;
  for (const auto& [id, cost] : report.clients) {
    if (dropouts.before_masked_input.count(id) != 0) continue;
    ++answering;
    row.client_sent_kib += cost.bytes_sent / 1024.0;
    row.client_received_kib += cost.bytes_received / 1024.0;
    row.client_ms += cost.seconds * 1e3;
  }
  row.client_sent_kib /= answering;
  row.client_received_kib /= answering;
  row.client_ms /= answering;
  row.server_sent_mib = report.server.bytes_sent / 1048576.0;
  row.server_received_mib = report.server.bytes_received / 1048576.0;
  row.server_s = report.server.seconds;
  return row;
}

// One client's distributed-DP encoding of a LeNet-5 update of norm 0.9 in
// a round of K clients (z = 1, C = 1, b = 32), its rounding and noise drawn
// as a deployed client draws them (an AES-256-CTR keystream of a secret
// key): mean ms over `repeats`.
double EncodeMs(int clients, int repeats) {
  fedprof::DdgParams p;
  p.clip_norm = 1;
  p.noise_sd = 1 / std::sqrt(static_cast<double>(clients));
  p.bits = 32;
  p.rounding_beta = std::exp(-0.5);
  p.dim = kLeNet5Params;
  p.granularity = fedprof::DdgGranularity(1, p.noise_sd, 32, clients, p.padded());
  p.rotation_seed = 1;
  fedprof::Rng rng(7);
  fedprof::secagg::Keystream bits(fedprof::secagg::RandomBytes(fedprof::secagg::kKeyBytes));
  std::vector<float> start(kLeNet5Params), w(kLeNet5Params);
  for (size_t i = 0; i < w.size(); ++i) {
    start[i] = static_cast<float>(fedprof::StandardNormal(rng) * 0.1);
    w[i] = start[i] + static_cast<float>(0.9 / std::sqrt(static_cast<double>(kLeNet5Params)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  size_t sink = 0;
  for (int r = 0; r < repeats; ++r) sink += fedprof::DdgEncode(p, start, w, bits)[0];
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return sink == 1 ? -1 : ms / repeats;  // the sink keeps the work
}

void PrintDistributedDp(const std::vector<int>& sizes) {
  std::printf("A client's cost under distributed DP against plain SecAgg+ (LeNet-5, one thread)\n\n");
  std::printf(
      "| K | input | words | client sent KiB | client received KiB | encode ms | session ms | total ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int clients : sizes) {
    fedprof::DdgParams shape;
    shape.dim = kLeNet5Params;
    const size_t padded = shape.padded();
    const Row plain = Measure(Protocol::kSecAggPlus, clients, 0, 1);
    const Row ddp = Measure(Protocol::kSecAggPlus, clients, 0, 1, padded, 32);
    const double encode = EncodeMs(clients, 5);
    std::printf("| %d | model and weight | %zu | %.1f | %.1f | 0 | %.1f | %.1f |\n", clients,
                kLeNet5Params + 1, plain.client_sent_kib, plain.client_received_kib, plain.client_ms,
                plain.client_ms);
    std::printf("| %d | distributed DP | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", clients, padded,
                ddp.client_sent_kib, ddp.client_received_kib, encode, ddp.client_ms, encode + ddp.client_ms);
    std::fflush(stdout);
  }
}

}  // namespace

// The parameters table of docs/secagg.md.
void PrintParams() {
  std::printf(
      "| protocol | n | gamma | c | k | t | U_1, U_3 at least | signatures needed | messages up / down | "
      "client sent KiB | client received KiB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (Protocol protocol : {Protocol::kSecAggPlus, Protocol::kSecAgg}) {
    for (int n : {100, 1000, 10000}) {
      for (double gamma : {0.05, 0.1, 0.2}) {
        Tolerance tolerance;
        tolerance.corrupt = gamma;
        const RoundParams p = ParamsFor(protocol, n, tolerance);
        const ClientTraffic traffic =
            TrafficOfOneClient(n, p.graph.neighbors, p.quorum, kLeNet5Params + 1, kChunkWords);
        const size_t chunks = (kLeNet5Params + 1 + kChunkWords - 1) / kChunkWords;
        std::printf("| %s | %d | %.2f | %d | %d | %d | %d | %d | %zu / 5 | %.1f | %.1f |\n",
                    ProtocolName(protocol).c_str(), n, gamma, p.corrupt, p.graph.neighbors,
                    p.graph.threshold, p.min_survivors, p.quorum, 5 + chunks, traffic.sent / 1024.0,
                    traffic.received / 1024.0);
      }
    }
  }
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--params") {
    PrintParams();
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == "--distributed-dp") {
    std::vector<int> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
    if (sizes.empty()) sizes = {100};
    try {
      PrintDistributedDp(sizes);
    } catch (const fedprof::Error& e) {
      std::fprintf(stderr, "secagg_bench: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {10, 50, 100, 500};
  std::vector<double> dropouts = {0.0, 0.1};
  if (const char* d = std::getenv("SECAGG_BENCH_DROPOUT")) dropouts = {std::atof(d)};
  std::printf("Secure aggregation of a LeNet-5 update (%zu words of 16 bytes), one thread; "
              "plain upload: %.1f KiB of float32\n\n",
              kLeNet5Params + 1, kLeNet5Params * 4 / 1024.0);
  std::printf("| protocol | K | dropped | k | t | client sent KiB | client received KiB | "
              "client ms | server received MiB | server sent MiB | server s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  try {
    for (int clients : sizes) {
      for (double dropout : dropouts) {
        for (Protocol protocol : {Protocol::kSecAgg, Protocol::kSecAggPlus}) {
          const Row r = Measure(protocol, clients, dropout, static_cast<uint64_t>(clients));
          std::printf("| %s | %d | %d | %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n",
                      ProtocolName(protocol).c_str(), clients,
                      static_cast<int>(dropout * clients), r.graph.neighbors, r.graph.threshold,
                      r.client_sent_kib, r.client_received_kib, r.client_ms, r.server_received_mib,
                      r.server_sent_mib, r.server_s);
          std::fflush(stdout);
        }
      }
    }
  } catch (const fedprof::Error& e) {
    std::fprintf(stderr, "secagg_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
