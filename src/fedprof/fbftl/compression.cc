#include "fedprof/fbftl/compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "fedprof/core/error.h"
#include "transfer.pb.h"

namespace fedprof {
namespace {

int IndexBits(int64_t n) {
  int b = 1;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

// Appends `value`'s low `bits` bits to a little-endian bit stream.
class BitWriter {
 public:
  explicit BitWriter(std::string* out) : out_(out) {}
  void Put(uint64_t value, int bits) {
    for (int i = 0; i < bits; ++i) {
      if (used_ % 8 == 0) out_->push_back('\0');
      if ((value >> i) & 1) out_->back() = static_cast<char>(out_->back() | (1 << (used_ % 8)));
      ++used_;
    }
  }

 private:
  std::string* out_;
  int64_t used_ = 0;
};

class BitReader {
 public:
  explicit BitReader(const std::string& in) : in_(in) {}
  uint64_t Get(int bits) {
    uint64_t v = 0;
    for (int i = 0; i < bits; ++i, ++pos_) {
      const auto byte = static_cast<unsigned char>(in_[static_cast<size_t>(pos_ / 8)]);
      v |= static_cast<uint64_t>((byte >> (pos_ % 8)) & 1) << i;
    }
    return v;
  }

 private:
  const std::string& in_;
  int64_t pos_ = 0;
};

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

int64_t KeptCount(int64_t n, double keep_ratio) {
  if (keep_ratio >= 1 || n == 0) return n;
  return std::clamp<int64_t>(std::llround(keep_ratio * static_cast<double>(n)), 1, n);
}

int64_t QuantizerLevels(const Compression& c) {
  const int64_t all = int64_t{1} << std::clamp(c.bits, 1, 31);
  return c.quantizer == Quantizer::kSymmetric ? std::max<int64_t>(2, all - 1) : all;
}

int64_t PayloadBits(int64_t n, const Compression& c) {
  if (c.is_dense()) return 32 * n;
  const int64_t kept = KeptCount(n, c.keep_ratio);
  const int64_t index_bits = kept < n ? kept * IndexBits(n) : 0;
  const int64_t range_bits = c.bits < 32 ? 64 : 0;
  return index_bits + kept * c.bits + range_bits;
}

void EncodeValues(const std::vector<float>& v, const Compression& c, wire::Values* out) {
  out->Clear();
  const auto n = static_cast<int64_t>(v.size());
  out->set_length(static_cast<uint64_t>(n));
  if (c.is_dense()) {
    std::string* dense = out->mutable_dense();
    dense->resize(v.size() * sizeof(float));
    // The wire is little-endian, as is every platform this builds on. (An
    // empty vector's data() may be null, which memcpy may not be given.)
    if (!v.empty()) std::memcpy(dense->data(), v.data(), dense->size());
    return;
  }
  if (c.bits < 1 || c.bits > 32) throw Error("compression bits must be in 1..32");
  const int64_t kept = KeptCount(n, c.keep_ratio);
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  if (kept < n) {
    // The kept elements in index order; ties in magnitude go to the lower index.
    std::nth_element(order.begin(), order.begin() + kept, order.end(), [&](int64_t a, int64_t b) {
      const float ma = std::fabs(v[a]), mb = std::fabs(v[b]);
      return ma > mb || (ma == mb && a < b);
    });
    order.resize(static_cast<size_t>(kept));
    std::sort(order.begin(), order.end());
  }
  out->set_bits(static_cast<uint32_t>(c.bits));
  out->set_kept(static_cast<uint64_t>(kept));
  std::string* packed = out->mutable_packed();
  BitWriter writer(packed);
  if (kept < n) {
    out->set_index_bits(static_cast<uint32_t>(IndexBits(n)));
    for (int64_t i : order) writer.Put(static_cast<uint64_t>(i), IndexBits(n));
  }
  if (c.bits == 32) {
    for (int64_t i : order) writer.Put(FloatBits(v[i]), 32);
    return;
  }
  float low = 0, high = 0;
  if (kept > 0) {
    low = high = v[order[0]];
    for (int64_t i : order) {
      low = std::min(low, v[i]);
      high = std::max(high, v[i]);
    }
  }
  const int64_t levels = QuantizerLevels(c);
  if (c.quantizer == Quantizer::kSymmetric) {
    high = std::max(std::fabs(low), std::fabs(high));
    low = -high;
    out->set_levels(static_cast<uint32_t>(levels));
  }
  out->set_low(low);
  out->set_high(high);
  const auto top = static_cast<double>(levels - 1);
  const double step = high > low ? (static_cast<double>(high) - low) / top : 0;
  for (int64_t i : order) {
    const double code = step > 0 ? std::nearbyint((v[i] - static_cast<double>(low)) / step) : 0;
    writer.Put(static_cast<uint64_t>(std::clamp(code, 0.0, top)), c.bits);
  }
}

int64_t WireValueBits(const wire::Values& in) {
  const bool quantised = in.bits() > 0 && in.bits() < 32;
  return 8 * static_cast<int64_t>(in.dense().size() + in.packed().size()) + (quantised ? 64 : 0);
}

std::vector<float> DecodeValues(const wire::Values& in, int64_t max_length, const char* what) {
  const std::string where = what;
  if (in.length() > static_cast<uint64_t>(max_length)) {
    throw Error(where + ": " + std::to_string(in.length()) + " values, more than the " +
                std::to_string(max_length) + " expected");
  }
  const auto n = static_cast<int64_t>(in.length());
  std::vector<float> v(static_cast<size_t>(n), 0.0f);
  if (in.bits() == 0) {
    if (in.dense().size() != v.size() * sizeof(float)) {
      throw Error(where + ": dense payload of " + std::to_string(in.dense().size()) +
                  " bytes for " + std::to_string(n) + " float32 values");
    }
    if (!v.empty()) std::memcpy(v.data(), in.dense().data(), in.dense().size());
    return v;
  }
  if (in.bits() > 32) throw Error(where + ": " + std::to_string(in.bits()) + " bits per value, not 1..32");
  // Compared unsigned: a kept count beyond 2^63 must not wrap to a negative.
  if (in.kept() > in.length()) {
    throw Error(where + ": keeps " + std::to_string(in.kept()) + " of " + std::to_string(n) + " values");
  }
  const auto kept = static_cast<int64_t>(in.kept());
  const bool sparse = kept < n;
  if (sparse && static_cast<int>(in.index_bits()) != IndexBits(n)) {
    throw Error(where + ": index width " + std::to_string(in.index_bits()) + " bits, expected " +
                std::to_string(IndexBits(n)));
  }
  const int64_t bits = (sparse ? kept * IndexBits(n) : 0) + kept * in.bits();
  if (static_cast<int64_t>(in.packed().size()) != (bits + 7) / 8) {
    throw Error(where + ": packed payload of " + std::to_string(in.packed().size()) +
                " bytes, expected " + std::to_string((bits + 7) / 8));
  }
  BitReader reader(in.packed());
  std::vector<int64_t> index(static_cast<size_t>(kept));
  for (int64_t k = 0; k < kept; ++k) {
    index[k] = sparse ? static_cast<int64_t>(reader.Get(IndexBits(n))) : k;
    if (index[k] >= n || (k > 0 && index[k] <= index[k - 1])) {
      throw Error(where + ": sparse index " + std::to_string(index[k]) + " out of range or order");
    }
  }
  const bool quantised = in.bits() < 32;
  const uint64_t all_codes = uint64_t{1} << std::min<uint32_t>(in.bits(), 31);
  const uint64_t levels = in.levels() > 0 ? in.levels() : all_codes;
  if (quantised && (levels < 2 || levels > all_codes)) {
    throw Error(where + ": " + std::to_string(in.levels()) + " levels do not fit " +
                std::to_string(in.bits()) + "-bit codes");
  }
  // EncodeValues writes finite low <= high; anything else would decode to
  // NaN or infinite values.
  if (quantised && kept > 0 &&
      !(std::isfinite(in.low()) && std::isfinite(in.high()) && in.low() <= in.high())) {
    throw Error(where + ": quantiser range [" + std::to_string(in.low()) + ", " +
                std::to_string(in.high()) + "], expected finite low <= high");
  }
  const double step =
      quantised ? (static_cast<double>(in.high()) - in.low()) / static_cast<double>(levels - 1) : 0;
  for (int64_t k = 0; k < kept; ++k) {
    const uint64_t code = reader.Get(static_cast<int>(in.bits()));
    if (!quantised) {
      v[index[k]] = BitsFloat(static_cast<uint32_t>(code));
      continue;
    }
    if (code >= levels) {
      throw Error(where + ": code " + std::to_string(code) + " beyond the " +
                  std::to_string(levels) + " levels");
    }
    // low + c·step can round past high (or below low) by an ulp of |low|
    // when the range is much narrower than its ends: the levels lie within
    // [low, high], so the value is clamped to them.
    v[index[k]] = static_cast<float>(std::clamp(in.low() + static_cast<double>(code) * step,
                                                static_cast<double>(in.low()),
                                                static_cast<double>(in.high())));
  }
  return v;
}

void ErrorFeedback::Encode(const std::vector<float>& g, const Compression& c, wire::Values* out) {
  if (memory_.empty()) memory_.assign(g.size(), 0.0f);
  if (memory_.size() != g.size()) throw Error("error feedback: gradient length changed");
  std::vector<float> corrected(g.size());
  for (size_t i = 0; i < g.size(); ++i) corrected[i] = g[i] + memory_[i];
  EncodeValues(corrected, c, out);
  const std::vector<float> sent =
      DecodeValues(*out, static_cast<int64_t>(g.size()), "error feedback");
  for (size_t i = 0; i < g.size(); ++i) memory_[i] = corrected[i] - sent[i];
}

double PacketLossRate(double block_loss, int blocks_per_packet) {
  return 1 - std::pow(1 - block_loss, blocks_per_packet);
}

double ExpectedTransmissions(double packet_loss, int retransmissions) {
  double sum = 0, term = 1;
  for (int n = 0; n <= retransmissions; ++n, term *= packet_loss) sum += term;
  return sum;
}

}  // namespace fedprof
