#include "fedprof/aggregation/model_sum.h"

#include <cmath>
#include <cstring>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

constexpr int kFractionBits = 64;

// v in units of 2^-64, rounded to the nearest (ties away from zero), read
// straight from v's bits: |v| < 2^62, so it fits. (ldexp + a cast through
// the runtime's double-to-int128 conversion cost five times as much.)
__int128 ToFixed(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
  if (exponent == 0) return 0;  // zero or subnormal: far below 2^-65
  const uint64_t mantissa = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);
  // v = mantissa * 2^(exponent - 1075), so v * 2^64 = mantissa * 2^shift.
  const int shift = exponent - 1075 + kFractionBits;
  unsigned __int128 magnitude;
  if (shift >= 0) {
    magnitude = static_cast<unsigned __int128>(mantissa) << shift;
  } else if (shift > -54) {
    magnitude = (mantissa + (uint64_t{1} << (-shift - 1))) >> -shift;
  } else {
    magnitude = 0;  // below half a unit
  }
  const __int128 fixed = static_cast<__int128>(magnitude);
  return (bits >> 63) != 0 ? -fixed : fixed;
}

double FromFixed(__int128 f) { return std::ldexp(static_cast<double>(f), -kFractionBits); }

}  // namespace

void ModelSum::Reset(size_t num_params) {
  sum_.assign(num_params, 0);
  count_ = 0;
  weight_ = 0;
}

void ModelSum::Add(const FlatParams& w, int64_t n) {
  if (w.size() != sum_.size()) {
    throw Error("aggregation: model of " + std::to_string(w.size()) + " values added to a sum of " +
                std::to_string(sum_.size()));
  }
  if (count_ >= kMaxModelSumTerms) {
    throw Error("aggregation: weight " + std::to_string(n) + " or term count out of range");
  }
  CheckTerm(w, n);
  const double dn = static_cast<double>(n);
  for (size_t i = 0; i < w.size(); ++i) sum_[i] += ToFixed(dn * w[i]);
  ++count_;
  weight_ += n;
}

void ModelSum::CheckTerm(const FlatParams& w, int64_t n) {
  if (n < 1 || n > kMaxModelSumWeight) {
    throw Error("aggregation: weight " + std::to_string(n) + " or term count out of range");
  }
  const double dn = static_cast<double>(n);
  for (float v : w) {
    if (!(std::fabs(dn * v) < kMaxModelSumTerm)) {
      throw Error("aggregation: a weighted value is beyond 2^40 (or not finite)");
    }
  }
}

std::vector<unsigned __int128> ModelSum::TermWords(const FlatParams& w, int64_t n) {
  CheckTerm(w, n);
  const double dn = static_cast<double>(n);
  std::vector<unsigned __int128> words(w.size() + 1);
  // Two's complement: the words add modulo 2^128 as the signed terms add.
  for (size_t i = 0; i < w.size(); ++i) words[i] = static_cast<unsigned __int128>(ToFixed(dn * w[i]));
  words[w.size()] = static_cast<unsigned __int128>(n);
  return words;
}

ModelSum ModelSum::FromTermWords(const std::vector<unsigned __int128>& words, int64_t count,
                                 const std::string& origin) {
  if (words.empty()) throw Error(origin + ": a summed term of no words");
  if (count < 0 || count > kMaxModelSumTerms) {
    throw Error(origin + ": a sum of " + std::to_string(count) + " terms, expected 0.." +
                std::to_string(kMaxModelSumTerms));
  }
  ModelSum s;
  s.count_ = count;
  // The weight word: a sum of at most 2^22 weights below 2^31 is below
  // 2^53; anything larger (or "negative") is refused by CheckBounds.
  const unsigned __int128 weight = words.back();
  s.weight_ = weight > static_cast<unsigned __int128>(count) * kMaxModelSumWeight
                  ? -1
                  : static_cast<int64_t>(weight);
  s.sum_.resize(words.size() - 1);
  for (size_t i = 0; i < s.sum_.size(); ++i) s.sum_[i] = static_cast<__int128>(words[i]);
  s.CheckBounds(origin);
  return s;
}

ModelSum ModelSum::FromUpdateSum(const FlatParams& base, const std::vector<double>& updates, int64_t count,
                                 const std::string& origin) {
  if (updates.size() != base.size()) {
    throw Error(origin + ": " + std::to_string(updates.size()) + " values for a model of " +
                std::to_string(base.size()));
  }
  if (count < 1 || count > kMaxModelSumTerms) {
    throw Error(origin + ": a sum of " + std::to_string(count) + " terms, expected 1.." +
                std::to_string(kMaxModelSumTerms));
  }
  const double bound = static_cast<double>(count) * kMaxModelSumTerm;
  ModelSum s;
  s.count_ = count;
  s.weight_ = count;
  s.sum_.resize(base.size());
  for (size_t i = 0; i < base.size(); ++i) {
    const double shift = static_cast<double>(count) * base[i];  // exact: count < 2^23
    if (!(std::fabs(updates[i]) < bound && std::fabs(shift) < bound)) {
      throw Error(origin + ": value " + std::to_string(i) + " is not finite or beyond the sum's range");
    }
    s.sum_[i] = ToFixed(updates[i]) + ToFixed(shift);
  }
  s.CheckBounds(origin);
  return s;
}

void ModelSum::Merge(const ModelSum& other) {
  if (other.sum_.size() != sum_.size()) {
    throw Error("aggregation: cannot merge sums of " + std::to_string(other.sum_.size()) + " and " +
                std::to_string(sum_.size()) + " values");
  }
  if (other.count_ > kMaxModelSumTerms - count_) {
    throw Error("aggregation: merging sums of " + std::to_string(count_) + " and " +
                std::to_string(other.count_) + " models, more than " +
                std::to_string(kMaxModelSumTerms));
  }
  for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += other.sum_[i];
  count_ += other.count_;
  weight_ += other.weight_;
}

double ModelSum::Centered(size_t i, float base) const {
  const double shift = static_cast<double>(weight_) * base;
  // |sum_[i]| <= 2^126 (Parse, Add, Merge) and |ToFixed(shift)| < 2^125: the
  // difference cannot overflow.
  if (std::fabs(shift) < 0x1p61) return FromFixed(sum_[i] - ToFixed(shift));
  return FromFixed(sum_[i]) - shift;
}

std::string ModelSum::Serialize() const {
  std::string out(2 * sizeof(int64_t) + sum_.size() * sizeof(__int128), '\0');
  std::memcpy(&out[0], &count_, sizeof(int64_t));
  std::memcpy(&out[sizeof(int64_t)], &weight_, sizeof(int64_t));
  if (!sum_.empty()) std::memcpy(&out[2 * sizeof(int64_t)], sum_.data(), sum_.size() * sizeof(__int128));
  return out;
}

ModelSum ModelSum::Parse(const std::string& bytes, const std::string& origin) {
  const size_t head = 2 * sizeof(int64_t);
  if (bytes.size() < head || (bytes.size() - head) % sizeof(__int128) != 0) {
    throw Error(origin + ": a model sum of " + std::to_string(bytes.size()) +
                " bytes is not 16 bytes + a multiple of 16");
  }
  ModelSum s;
  std::memcpy(&s.count_, bytes.data(), sizeof(int64_t));
  std::memcpy(&s.weight_, bytes.data() + sizeof(int64_t), sizeof(int64_t));
  s.CheckBounds(origin);
  s.sum_.resize((bytes.size() - head) / sizeof(__int128));
  if (!s.sum_.empty()) std::memcpy(s.sum_.data(), bytes.data() + head, bytes.size() - head);
  s.CheckBounds(origin);
  return s;
}

void ModelSum::CheckBounds(const std::string& origin) const {
  // What Add and Merge can make: count terms, each of weight 1..2^31 - 1 and
  // of values below 2^40 (2^104 in fixed point).
  if (count_ < 0 || count_ > kMaxModelSumTerms || weight_ < count_ ||
      weight_ > count_ * kMaxModelSumWeight) {
    throw Error(origin + ": model sum of " + std::to_string(count_) + " models of weight " +
                std::to_string(weight_) + ", expected 0.." + std::to_string(kMaxModelSumTerms) +
                " models of weight 1.." + std::to_string(kMaxModelSumWeight) + " each");
  }
  const __int128 bound = static_cast<__int128>(count_) << (kFractionBits + 40);
  for (size_t i = 0; i < sum_.size(); ++i) {
    if (sum_[i] > bound || sum_[i] < -bound) {
      throw Error(origin + ": model sum value " + std::to_string(i) + " is beyond what " +
                  std::to_string(count_) + " models below 2^40 can add up to");
    }
  }
}

void ExactSum::Add(double value) {
  if (!(std::fabs(value) < kMaxModelSumTerm)) {
    throw Error("exact sum: value beyond 2^40 (or not finite)");
  }
  sum_ += ToFixed(value);
  ++count_;
}

double ExactSum::value() const { return FromFixed(sum_); }

}  // namespace fedprof
