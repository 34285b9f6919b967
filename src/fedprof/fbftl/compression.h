#ifndef FEDPROF_FBFTL_COMPRESSION_H_
#define FEDPROF_FBFTL_COMPRESSION_H_

#include <cstdint>
#include <vector>

namespace fedprof {

namespace wire {
class Values;
}

// How Q_q places its levels.
enum class Quantizer {
  // 2^q levels spread evenly between the kept values' min and max (the
  // paper's Q_q). A vector of both signs has no level at 0.
  kMinMax,
  // 2^q − 1 levels spread evenly over [−M, M], M the largest kept magnitude,
  // so 0 is a level (q = 1: the two levels ±M, a scaled sign).
  kSymmetric,
};

// Upload compression of the FbFTL paper (Eqs. 20-22): top-k sparsification
// S_r keeps the r·n elements of largest magnitude (at least one); q-bit
// quantisation Q_q maps each kept value to the nearest of its levels. q = 32
// sends float32 values unquantised; r = 1 and q = 32 is the dense vector.
struct Compression {
  double keep_ratio = 1;  // r
  int bits = 32;          // q, 1..32
  Quantizer quantizer = Quantizer::kMinMax;
  bool is_dense() const { return keep_ratio >= 1 && bits >= 32; }
};

// Levels Q_q uses for q < 32: 2^q (min-max) or max(2, 2^q − 1) (symmetric).
int64_t QuantizerLevels(const Compression& c);

// Elements S_r keeps of a vector of n.
int64_t KeptCount(int64_t n, double keep_ratio);

// Bits the values of an n-vector take on the wire (the `dense` or `packed`
// field, plus the float32 min and max when quantised): 32 n dense; otherwise
// kept · q, plus kept · ceil(log2 n) for the indices when r < 1.
int64_t PayloadBits(int64_t n, const Compression& c);

// Writes Q_q(S_r(v)) into `out`.
void EncodeValues(const std::vector<float>& v, const Compression& c, wire::Values* out);

// Bits of `in`'s value fields as serialised (dense or packed bytes, plus the
// float32 min and max when quantised).
int64_t WireValueBits(const wire::Values& in);

// The dense vector `in` stands for (zeros where S_r dropped elements). Throws
// fedprof::Error naming `what` and the inconsistency for a malformed message
// (sizes that do not match, an index out of range or out of order, bits
// outside 1..32) or one longer than `max_length`.
std::vector<float> DecodeValues(const wire::Values& in, int64_t max_length, const char* what);

// Error feedback for a gradient upload (Eqs. 20-21): sends
// g' = Q_q(S_r(g + m)) and keeps m ← g + m − g' (m starts at zero), so what
// compression dropped is sent in a later round. One per client; survives the
// rounds the client is not selected.
class ErrorFeedback {
 public:
  // Adds the memory to `g`, encodes it into `out`, and updates the memory to
  // what the encoding lost.
  void Encode(const std::vector<float>& g, const Compression& c, wire::Values* out);
  const std::vector<float>& memory() const { return memory_; }

 private:
  std::vector<float> memory_;
};

// Eq. 18: a packet of n_b blocks, each lost with probability BLR, is lost
// with probability PLR = 1 − (1 − BLR)^{n_b}.
double PacketLossRate(double block_loss, int blocks_per_packet);

// Eq. 19: expected transmissions per packet with up to n_r retransmissions of
// a packet lost with probability PLR: Σ_{n=0..n_r} PLR^n (the expected
// payload is the loss-free payload times this).
double ExpectedTransmissions(double packet_loss, int retransmissions);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_COMPRESSION_H_
