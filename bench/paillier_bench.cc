// Cost of profile matching under Paillier encryption (App. C.2), one thread.
//
// For the profiled layer of each model (models.cc: LeNet-5 fc1, 120 units;
// cnn fc1, 128; ResNet-18 layer4, 512 channels) and 2048- and 3072-bit keys:
// the server's time to encrypt a reference, the client's time to compute
// its encrypted divergence, the server's time to decrypt it, and the bytes
// each way. Timings are medians of a few runs (key generation: of several
// keys, since prime search time varies a lot). Prints a Markdown table.
//
//   paillier_bench [--quick]   (--quick: LeNet-5 and a 2048-bit key only, one try each)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "fedprof/privacy/paillier.h"
#include "fedprof/privacy/secure_matching.h"
#include "fedprof/profiling/profile.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double MedianMs(int reps, F f) {
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

fedprof::Profile RandomProfile(std::mt19937_64& rng, size_t units) {
  std::uniform_real_distribution<double> mean(-5, 5), log_var(std::log(1e-4), std::log(1e2));
  fedprof::Profile p;
  p.layer = "bench";
  for (size_t i = 0; i < units; ++i) {
    p.mean.push_back(mean(rng));
    p.var.push_back(std::exp(log_var(rng)));
  }
  return p;
}

struct Layer {
  const char* model;
  const char* layer;
  size_t units;
};

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc == 2 && std::string(argv[1]) == "--quick";
  if (argc > 1 && !quick) {
    std::fprintf(stderr, "paillier_bench: the one option is --quick\n");
    return 1;
  }
  std::vector<Layer> layers = {{"lenet5", "fc1", 120}, {"cnn", "fc1", 128}, {"resnet18", "layer4", 512}};
  if (quick) layers.resize(1);
  const std::vector<int> key_bits = quick ? std::vector<int>{2048} : std::vector<int>{2048, 3072};
  std::mt19937_64 rng(1);
  std::printf(
      "| model | layer | q | key bits | key gen ms | server encrypt ms | client ms | "
      "server decrypt ms | bytes to client | bytes to server | rel. error |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int bits : key_bits) {
    std::vector<fedprof::PaillierSecretKey> keys;
    const double keygen_ms = MedianMs(
        quick ? 1 : bits == 2048 ? 7 : 5, [&] { keys.push_back(fedprof::PaillierSecretKey::Generate(bits)); });
    const fedprof::PaillierSecretKey& key = keys.front();
    const fedprof::PaillierPublicKey& pub = key.public_key();
    for (const Layer& l : layers) {
      const fedprof::Profile reference = RandomProfile(rng, l.units);
      fedprof::Profile client = RandomProfile(rng, l.units);
      fedprof::SecureReference sent;
      const double encrypt_ms =
          MedianMs(1, [&] { sent = fedprof::EncryptReference(key, reference); });
      const std::string wire = sent.Serialize();
      std::string answer;
      const double client_ms =
          MedianMs(3, [&] { answer = fedprof::EncryptedDivergence(pub, sent, client); });
      double secure = 0;
      const double decrypt_ms =
          MedianMs(5, [&] { secure = fedprof::DecryptDivergence(key, answer, l.units); });
      const double plain = fedprof::Divergence(client, reference);
      std::printf("| %s | %s | %zu | %d | %.0f | %.0f | %.0f | %.2f | %zu | %zu | %.1e |\n",
                  l.model, l.layer, l.units, bits, keygen_ms, encrypt_ms, client_ms, decrypt_ms,
                  wire.size(), answer.size(), std::fabs(secure - plain) / plain);
      std::fflush(stdout);
    }
  }
  std::printf(
      "\nbytes to client: the serialised SecureReference (3q ciphertexts), sent once per "
      "model version,\nplus the public key once (%d or %d bytes). Bytes to server: one "
      "ciphertext per client.\n",
      2048 / 8, 3072 / 8);
  return 0;
}
