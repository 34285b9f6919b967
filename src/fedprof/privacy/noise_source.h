#ifndef FEDPROF_PRIVACY_NOISE_SOURCE_H_
#define FEDPROF_PRIVACY_NOISE_SOURCE_H_

// Where a party draws its DP randomness (dp.noise): the server's noise and
// sample under central DP, each client's rounding and noise under
// distributed DP.
//
// - seeded: the run's seed. Simulate, launch and compare give the same
//   model wherever they run, and whoever knows the config can recompute the
//   noise and subtract it: a deployment refuses it.
// - secret: OpenSSL's generator. No one can recompute it, no run repeats it.
// - keyed: a 32-byte key of the party's own (a key file, kept where the
//   party runs); the bits of one use are the AES-256-CTR keystream of
//   HKDF-SHA256(key, label, context). Whoever holds the key can recompute
//   them (a simulation handed the deployment's keys gives its model bit for
//   bit); no one else can. The context must differ between uses: a client
//   never contributes twice to one task (privacy/client_ledger.h), whose
//   digest is its noise's context.
//
// Every primitive is OpenSSL's (secagg/crypto.h: HKDF-SHA256, the AES-256-CTR
// keystream, the generator).

#include <cstdint>
#include <memory>
#include <string>

#include "fedprof/core/rng.h"

namespace fedprof {

enum class NoiseKind { kSeeded, kSecret, kKeyed };
// "seeded", "secret", "keyed"; throws fedprof::Error naming dp.noise.
NoiseKind ParseNoiseKind(const std::string& name);

// A party's source of DP randomness.
struct NoiseSource {
  NoiseKind kind = NoiseKind::kSeeded;
  std::string key;  // kKeyed: the party's 32-byte key
};

// The bits of one use: `seeded` itself (kSeeded: the caller's stream of the
// run's seed), a keystream of a fresh key from OpenSSL (kSecret), or of
// HKDF-SHA256(key, label 0x00 context) (kKeyed).
std::unique_ptr<RandomBits> NoiseBits(const NoiseSource& source, const std::string& label,
                                      const std::string& context, Rng seeded);
// The same as a generator for code that draws from an Rng (the sample of a
// round): kSeeded gives `seeded`; the others a generator seeded by 256 bits
// of their keystream.
Rng NoiseRng(const NoiseSource& source, const std::string& label, const std::string& context, Rng seeded);

// A key file: 64 hex digits and a newline, readable by its owner only.
// ReadNoiseKey throws fedprof::Error naming the file when it is missing,
// malformed, or readable by others; WriteNewNoiseKey writes a fresh key from
// OpenSSL's generator (mode 0600) and never replaces a file.
std::string ReadNoiseKey(const std::string& path);
void WriteNewNoiseKey(const std::string& path);
// A fresh key as its file holds it.
std::string NewNoiseKeyText();

// One key, one run: records that the key at `key_path` serves run `run` (a
// line of key_path + ".runs"), and throws fedprof::Error naming the run it
// served when it served another (`resume`: `run` itself may be listed).
void ClaimNoiseKey(const std::string& key_path, const std::string& run, bool resume);

// The key files' names in a directory of keys: the server's (its central
// noise and its sample under DP) and client `id`'s (its distributed noise).
std::string ServerNoiseKeyPath(const std::string& dir);
std::string ClientNoiseKeyPath(const std::string& dir, int64_t id);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_NOISE_SOURCE_H_
