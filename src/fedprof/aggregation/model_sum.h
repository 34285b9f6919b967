#ifndef FEDPROF_AGGREGATION_MODEL_SUM_H_
#define FEDPROF_AGGREGATION_MODEL_SUM_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/core/params.h"

namespace fedprof {

// Largest |n · w| one term may have: 2^40. Terms are held as 128-bit
// integers in units of 2^-64, so a sum of up to kMaxModelSumTerms such terms
// cannot overflow. Server::Validate refuses results beyond it.
constexpr double kMaxModelSumTerm = 0x1p40;
constexpr int64_t kMaxModelSumTerms = int64_t{1} << 22;
// Largest weight n of one term (the sample count a client may claim), so
// that weight() < 2^53 stays exact.
constexpr int64_t kMaxModelSumWeight = (int64_t{1} << 31) - 1;

// Σ n_k · w_k over the clients' models, accumulated exactly: each product
// n_k · w_k,i is rounded once, to a multiple of 2^-64, and the integers are
// added without rounding. The sum therefore does not depend on the order in
// which results arrive, nor on how they are grouped (threads, ranks, a
// network), and aggregation stays bit-reproducible while results are folded
// in as they come and then dropped. Thread-compatible.
class ModelSum {
 public:
  // Empties the sum for models of `num_params` values, keeping its buffer.
  void Reset(size_t num_params);

  size_t size() const { return sum_.size(); }
  int64_t count() const { return count_; }    // models added
  int64_t weight() const { return weight_; }  // Σ n_k

  // Adds n · w. Requires w.size() == size(), 1 <= n <= kMaxModelSumWeight
  // and |n · w_i| < kMaxModelSumTerm (Server::Validate checks it); throws
  // fedprof::Error otherwise and leaves the sum unchanged.
  void Add(const FlatParams& w, int64_t n);

  // Adds another sum of the same size (a rank's share, say). Throws
  // fedprof::Error, leaving the sum unchanged, if the sizes differ or the
  // terms would exceed kMaxModelSumTerms.
  void Merge(const ModelSum& other);

  // Σ n_k w_k,i − weight() · base_i, rounded once to a double (base_i = 0
  // gives the plain sum) while |weight() · base_i| < 2^61; beyond that (a
  // global model its clients pushed towards 2^40) the plain sum minus
  // weight() · base_i in double, still independent of the terms' order.
  double Centered(size_t i, float base) const;

  // One client's term as the words secure aggregation masks and adds modulo
  // 2^128 (secagg/): n · w_i in units of 2^-64 as two's-complement 128-bit
  // words, as Add would add them, then n itself, so that the clients' words
  // sum to this sum's values and weight. The same checks as Add (without a
  // size to match); throws fedprof::Error.
  static std::vector<unsigned __int128> TermWords(const FlatParams& w, int64_t n);
  // The sum of `count` clients' TermWords modulo 2^128 (size() + 1 words)
  // as a ModelSum, equal bit for bit to adding their models with Add.
  // Throws fedprof::Error naming `origin` if it is not a sum that `count`
  // terms can make (the bounds of Parse).
  static ModelSum FromTermWords(const std::vector<unsigned __int128>& words, int64_t count,
                                const std::string& origin);

  // The sum of `count` updates of weight 1 each from `base`, given as their
  // sum `updates` (distributed DP's decoded sum): Centered(i, base) gives
  // updates[i] back to within 2^-64. Throws fedprof::Error naming `origin`
  // if a value is not finite or not one count terms of Add could make.
  static ModelSum FromUpdateSum(const FlatParams& base, const std::vector<double>& updates, int64_t count,
                                const std::string& origin);

  // Raw bytes (count, weight, then the 128-bit sums), and back; Parse throws
  // fedprof::Error naming `origin` on malformed input or on a sum that Add
  // could not have made (a count, weight or value out of range).
  std::string Serialize() const;
  static ModelSum Parse(const std::string& bytes, const std::string& origin);

 private:
  static void CheckTerm(const FlatParams& w, int64_t n);
  // Throws unless count, weight and every value are what count terms of Add
  // can make.
  void CheckBounds(const std::string& origin) const;

  std::vector<__int128> sum_;
  int64_t count_ = 0;
  int64_t weight_ = 0;
};

// A sum of doubles with the same exactness (each value rounded to a multiple
// of 2^-64, |value| < kMaxModelSumTerm): order-independent, for round
// statistics such as the mean training loss.
class ExactSum {
 public:
  void Add(double value);
  double value() const;
  int64_t count() const { return count_; }

 private:
  __int128 sum_ = 0;
  int64_t count_ = 0;
};

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_MODEL_SUM_H_
