#include "fedprof/privacy/noise_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/secagg/crypto.h"

namespace fedprof {
namespace {

// The 32-byte key of one use.
secagg::Bytes UseKey(const NoiseSource& source, const std::string& label, const std::string& context) {
  if (source.kind == NoiseKind::kSecret) return secagg::RandomBytes(secagg::kKeyBytes);
  if (source.key.size() != secagg::kKeyBytes) {
    throw Error("dp.noise = keyed: a key of " + std::to_string(source.key.size()) + " bytes, expected 32");
  }
  return secagg::Hkdf(source.key, "fedprof dp noise " + label + std::string(1, '\0') + context);
}

}  // namespace

NoiseKind ParseNoiseKind(const std::string& name) {
  if (name == "seeded") return NoiseKind::kSeeded;
  if (name == "secret") return NoiseKind::kSecret;
  if (name == "keyed") return NoiseKind::kKeyed;
  throw Error("dp.noise: '" + Printable(name, 40) + "' is not seeded, secret or keyed");
}

std::unique_ptr<RandomBits> NoiseBits(const NoiseSource& source, const std::string& label,
                                      const std::string& context, Rng seeded) {
  if (source.kind == NoiseKind::kSeeded) return std::make_unique<SeededBits>(std::move(seeded));
  return std::make_unique<secagg::Keystream>(UseKey(source, label, context));
}

Rng NoiseRng(const NoiseSource& source, const std::string& label, const std::string& context, Rng seeded) {
  if (source.kind == NoiseKind::kSeeded) return seeded;
  secagg::Keystream bits(UseKey(source, label, context));
  std::vector<uint32_t> words;
  for (int i = 0; i < 4; ++i) {
    const uint64_t w = bits.Next();
    words.push_back(static_cast<uint32_t>(w));
    words.push_back(static_cast<uint32_t>(w >> 32));
  }
  std::seed_seq seq(words.begin(), words.end());
  return Rng(seq);
}

std::string ReadNoiseKey(const std::string& path) {
  if (!FileExists(path)) {
    throw Error(path + ": no such file (dp.noise = keyed: fedprof keygen makes a party's key)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot be read: " + std::strerror(errno));
  if ((st.st_mode & 077) != 0) {
    throw Error(path +
                ": a DP noise key readable by others than its owner (chmod 600 it, or make a new one)");
  }
  std::string text = ReadFile(path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::string key;
  try {
    key = HexDecode(text);
  } catch (const Error&) {
    key.clear();
  }
  if (key.size() != secagg::kKeyBytes) throw Error(path + ": not a DP noise key (64 hex digits)");
  return key;
}

std::string NewNoiseKeyText() { return HexEncode(secagg::RandomBytes(secagg::kKeyBytes)) + "\n"; }

void WriteNewNoiseKey(const std::string& path) { WriteNewFile(path, NewNoiseKeyText(), 0600); }

void ClaimNoiseKey(const std::string& key_path, const std::string& run, bool resume) {
  const std::string uses = key_path + ".runs";
  std::string served;  // the run the key served, if any
  if (FileExists(uses)) {
    std::istringstream lines(ReadFile(uses));
    for (std::string line; std::getline(lines, line);) {
      if (resume && line == run) return;  // the same run, resumed
      if (!line.empty() && served.empty()) served = line;
    }
  }
  if (!served.empty()) {
    throw Error(key_path + " served run " + Printable(served, 200) +
                " already: one key serves one run, or the two would share their noise (fedprof keygen "
                "--server --out DIR makes another)");
  }
  AppendLine(uses, run + "\n", 0600);
}

std::string ServerNoiseKeyPath(const std::string& dir) { return dir + "/server.dp.key"; }

std::string ClientNoiseKeyPath(const std::string& dir, int64_t id) {
  return dir + "/client-" + std::to_string(id) + ".dp.key";
}

}  // namespace fedprof
