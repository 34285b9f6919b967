#ifndef FEDPROF_PRIVACY_LABEL_LEAKAGE_H_
#define FEDPROF_PRIVACY_LABEL_LEAKAGE_H_

#include <cstdint>
#include <vector>

namespace fedprof {

// Label privacy of uploads that carry K one-hot labels per client over N
// classes (FbFTL paper, Section V, Eqs. 23-36). A client's "batch" b is the
// multiset of its K labels; all entropies are in bits.

// |B| = C(N + K − 1, K): the number of batch types (Eq. 23).
double NumBatchTypes(int classes, int labels_per_client);

// H(B | P) = −Σ_b p_b log2 p_b with p_b = K! / Π_a n_{a,b}! · Π_a P_a^{n_{a,b}}
// (Eqs. 24-27; P uniform gives Eq. 25). Enumerates every batch type; throws
// fedprof::Error naming --samples-per-client when |B| exceeds 5e7, or when
// `label_distribution` is not a distribution over `classes` labels.
double BatchEntropyBits(const std::vector<double>& label_distribution, int labels_per_client);

// H(B | C_U = c_U) (Eq. 30): the entropy of the empirical distribution of
// batch types among `clients` batches drawn from `label_distribution`,
// seeded.
double EmpiricalBatchEntropyBits(const std::vector<double>& label_distribution,
                                 int labels_per_client, int64_t clients, uint64_t seed);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_LABEL_LEAKAGE_H_
