#include "fedprof/privacy/secure_matching.h"

#include <chrono>

#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

// Every finite double times 2^1074 is an integer, so values scaled by this
// are exact and products of them round only once, at the end.
constexpr int kExactShift = 1074;
constexpr char kMagic[] = "FPSR";
constexpr unsigned char kFormat = 1;
constexpr size_t kMaxLayerBytes = 4096;

// ½·log(variance) at kDivergenceScaleBits; the same double gives the same
// integer on both sides, so identical profiles cancel exactly.
BigInt HalfLogVariance(double variance) {
  return BigInt::FromScaled(0.5L * std::log(static_cast<long double>(variance)),
                            kDivergenceScaleBits);
}

void AppendUint(std::string* out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// Reads `bytes` bytes big-endian at *pos; Error naming `what` if truncated.
uint64_t ReadUint(const std::string& in, size_t* pos, int bytes, const char* what) {
  if (in.size() - *pos < static_cast<size_t>(bytes)) {
    throw Error(std::string("secure reference: truncated in ") + what);
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[*pos + i]);
  *pos += bytes;
  return v;
}

Ciphertext ParseUnit(const PaillierPublicKey& key, const std::string& bytes, const char* field,
                     size_t unit) {
  try {
    return key.ParseCiphertext(bytes);
  } catch (const Error& e) {
    throw Error("secure reference: " + std::string(field) + "[" + std::to_string(unit) +
                "]: " + e.what());
  }
}

std::string Format(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", v);
  return buffer;
}

// CheckEncodable with the side and unit in the message.
void CheckValue(const BigInt& value, const char* side, size_t unit, const char* what) {
  try {
    CheckEncodable(value, what);
  } catch (const Error& e) {
    throw Error("secure matching: " + std::string(side) + " unit " + std::to_string(unit) + ": " +
                e.what());
  }
}

void CheckUnits(size_t units, const char* what) {
  if (units == 0 || units > kMaxSecureUnits) {
    throw Error(std::string(what) + ": " + std::to_string(units) + " units, expected 1.." +
                std::to_string(kMaxSecureUnits));
  }
}

}  // namespace

std::string SecureReference::Serialize() const {
  if (w_mu.size() != w.size() || c.size() != w.size() || w.empty()) {
    throw Error("secure reference: w, w_mu and c must hold the same number (>= 1) of ciphertexts");
  }
  const size_t length = w[0].size();
  std::string out(kMagic, 4);
  out.push_back(static_cast<char>(kFormat));
  AppendUint(&out, static_cast<uint64_t>(version), 8);
  AppendUint(&out, layer.size(), 4);
  out += layer;
  AppendUint(&out, w.size(), 4);
  AppendUint(&out, length, 4);
  for (const auto* field : {&w, &w_mu, &c}) {
    for (const std::string& ct : *field) {
      if (ct.size() != length) throw Error("secure reference: ciphertexts of different lengths");
      out += ct;
    }
  }
  return out;
}

SecureReference SecureReference::Parse(const std::string& bytes, const PaillierPublicKey& key) {
  if (bytes.size() < 5 || bytes.compare(0, 4, kMagic, 4) != 0) {
    throw Error("secure reference: does not start with FPSR");
  }
  if (static_cast<unsigned char>(bytes[4]) != kFormat) {
    throw Error("secure reference: format " + std::to_string(static_cast<unsigned char>(bytes[4])) +
                ", expected " + std::to_string(kFormat));
  }
  size_t pos = 5;
  SecureReference ref;
  ref.version = static_cast<int64_t>(ReadUint(bytes, &pos, 8, "version"));
  const uint64_t layer_bytes = ReadUint(bytes, &pos, 4, "layer length");
  if (layer_bytes > kMaxLayerBytes) {
    throw Error("secure reference: layer name of " + std::to_string(layer_bytes) +
                " bytes, at most " + std::to_string(kMaxLayerBytes));
  }
  if (bytes.size() - pos < layer_bytes) throw Error("secure reference: truncated in layer");
  ref.layer = bytes.substr(pos, layer_bytes);
  pos += layer_bytes;
  const uint64_t units = ReadUint(bytes, &pos, 4, "units");
  CheckUnits(units, "secure reference");
  const uint64_t length = ReadUint(bytes, &pos, 4, "ciphertext length");
  if (length != key.ciphertext_bytes()) {
    throw Error("secure reference: ciphertexts of " + std::to_string(length) +
                " bytes, the key's are " + std::to_string(key.ciphertext_bytes()));
  }
  // units and length are bounded, so this cannot overflow.
  const uint64_t expected = pos + 3 * units * length;
  if (bytes.size() != expected) {
    throw Error("secure reference: " + std::to_string(bytes.size()) + " bytes, expected " +
                std::to_string(expected) + " for " + std::to_string(units) + " units");
  }
  for (auto [field, name] : {std::make_pair(&ref.w, "w"), std::make_pair(&ref.w_mu, "w_mu"),
                             std::make_pair(&ref.c, "c")}) {
    field->reserve(units);
    for (size_t i = 0; i < units; ++i, pos += length) {
      field->push_back(bytes.substr(pos, length));
      ParseUnit(key, field->back(), name, i);
    }
  }
  return ref;
}

SecureReference EncryptReference(const PaillierSecretKey& key, const Profile& reference) {
  const std::string reason = CheckProfile(reference, reference);
  if (!reason.empty()) throw Error("secure matching: reference profile: " + reason);
  CheckUnits(reference.units(), "secure matching: reference profile");
  const PaillierPublicKey& pub = key.public_key();
  const int s1 = kServerScaleBits, s2 = kClientScaleBits, s = kDivergenceScaleBits;
  const BigInt numerator = BigInt::PowerOfTwo(s1 - 1 + kExactShift);
  const BigInt half = BigInt::PowerOfTwo(s - 1);

  SecureReference out;
  out.version = reference.version;
  out.layer = reference.layer;
  for (size_t i = 0; i < reference.units(); ++i) {
    const double var = reference.var[i];
    // w = 1/(2σ²) at scale s1: round(2^(s1−1) / σ²), exact division.
    const BigInt w = numerator.RoundDiv(BigInt::FromScaled(var, kExactShift));
    const BigInt mu = BigInt::FromScaled(reference.mean[i], kExactShift);
    // w·μ and w·μ² from the rounded w, so that the client's
    // w·μ_k² − 2μ_k·(w·μ_V) + w·μ_V² cancels as w·(μ_k − μ_V)² does.
    const BigInt w_mu = (w * mu).RoundShiftRight(kExactShift);
    const BigInt c =
        HalfLogVariance(var) - half + (w * mu * mu).RoundShiftRight(2 * kExactShift - s2);
    CheckValue(w, "reference", i, "w = 1/(2 var)");
    CheckValue(w_mu, "reference", i, "w * mean");
    CheckValue(c, "reference", i, "c");
    out.w.push_back(pub.SerializeCiphertext(key.Encrypt(w)));
    out.w_mu.push_back(pub.SerializeCiphertext(key.Encrypt(w_mu)));
    out.c.push_back(pub.SerializeCiphertext(key.Encrypt(c)));
  }
  return out;
}

std::string EncryptedDivergence(const PaillierPublicKey& key, const SecureReference& reference,
                                const Profile& client) {
  const size_t q = reference.units();
  if (reference.w_mu.size() != q || reference.c.size() != q) {
    throw Error("secure reference: w, w_mu and c hold " + std::to_string(q) + ", " +
                std::to_string(reference.w_mu.size()) + " and " +
                std::to_string(reference.c.size()) + " ciphertexts");
  }
  CheckUnits(q, "secure reference");
  // CheckProfile compares with the reference's shape only.
  Profile shape;
  shape.version = reference.version;
  shape.layer = reference.layer;
  shape.mean.resize(q);
  shape.var.resize(q);
  const std::string reason = CheckProfile(client, shape);
  if (!reason.empty()) throw Error("secure matching: client profile: " + reason);

  // Σ_i −½·log σ_k,i², the one fresh encryption.
  BigInt log_sum;
  for (double var : client.var) log_sum = log_sum - HalfLogVariance(var);
  try {
    CheckEncodable(log_sum, "sum of -log(var)/2");
  } catch (const Error& e) {
    throw Error(std::string("secure matching: client: ") + e.what());
  }
  Ciphertext total = key.Encrypt(log_sum);

  const int s2 = kClientScaleBits;
  for (size_t i = 0; i < q; ++i) {
    const BigInt mu = BigInt::FromScaled(client.mean[i], kExactShift);
    // σ² + μ² and −2μ at scale s2.
    const BigInt a = (BigInt::FromScaled(client.var[i], 2 * kExactShift) + mu * mu)
                         .RoundShiftRight(2 * kExactShift - s2);
    const BigInt b = -mu.RoundShiftRight(kExactShift - s2 - 1);
    CheckValue(a, "client", i, "var + mean^2");
    CheckValue(b, "client", i, "-2 mean");
    total = key.Add(total, key.MulPlain(ParseUnit(key, reference.w[i], "w", i), a));
    total = key.Add(total, key.MulPlain(ParseUnit(key, reference.w_mu[i], "w_mu", i), b));
    total = key.Add(total, ParseUnit(key, reference.c[i], "c", i));
  }
  return key.SerializeCiphertext(total);
}

double DecryptDivergence(const PaillierSecretKey& key, const std::string& ciphertext,
                         size_t units) {
  CheckUnits(units, "encrypted divergence");
  Ciphertext c = [&] {
    try {
      return key.public_key().ParseCiphertext(ciphertext);
    } catch (const Error& e) {
      throw Error(std::string("encrypted divergence: ") + e.what());
    }
  }();
  const BigInt total = key.DecryptSigned(c);
  // 3q + 1 terms, each below 2^(2·kMaxEncodedBits) in magnitude.
  const BigInt bound =
      BigInt(static_cast<int64_t>(3 * units + 1)) * BigInt::PowerOfTwo(2 * kMaxEncodedBits);
  if (total >= bound || total <= -bound) {
    throw Error("encrypted divergence: decrypts to a value of " +
                std::to_string(total.bit_length()) +
                " bits, outside what an honest client can encode (forged or corrupted?)");
  }
  const double divergence = DecodeFixed(total, kDivergenceScaleBits) / static_cast<double>(units);
  if (divergence < -kMaxNegativeDivergence) {
    throw Error("encrypted divergence: decrypts to " + Format(divergence) +
                ", but a KL divergence is never negative (forged or corrupted?)");
  }
  return divergence < 0 ? 0.0 : divergence;
}

SecureMatchingRun RunSecureMatching(const Profile& client, const Profile& reference,
                                    int key_bits) {
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  SecureMatchingRun run;
  auto t = Clock::now();
  const PaillierSecretKey key = PaillierSecretKey::Generate(key_bits);
  run.key_ms = ms_since(t);
  t = Clock::now();
  const std::string public_key = key.public_key().Serialize();
  const std::string sent = EncryptReference(key, reference).Serialize();
  run.server_ms = ms_since(t);
  run.bytes_to_client = static_cast<int64_t>(public_key.size() + sent.size());
  t = Clock::now();
  const PaillierPublicKey received_key = PaillierPublicKey::Parse(public_key);
  const std::string ciphertext =
      EncryptedDivergence(received_key, SecureReference::Parse(sent, received_key), client);
  run.client_ms = ms_since(t);
  run.bytes_to_server = static_cast<int64_t>(ciphertext.size());
  t = Clock::now();
  run.divergence = DecryptDivergence(key, ciphertext, reference.units());
  run.server_ms += ms_since(t);
  return run;
}

}  // namespace fedprof
