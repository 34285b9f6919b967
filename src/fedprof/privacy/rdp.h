#ifndef FEDPROF_PRIVACY_RDP_H_
#define FEDPROF_PRIVACY_RDP_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace fedprof {

// Rényi-DP accounting of the (Poisson-)subsampled Gaussian mechanism, the
// noise FedProf/FbFTL add to uploads (clip to L2 norm S, add N(0, σ²S²)).

// RDP of order `order` (an integer >= 2) of `steps` compositions of the
// sampled Gaussian mechanism with sampling rate q and noise multiplier σ:
// steps · log(A_α) / (α − 1) with
// A_α = Σ_{k=0..α} C(α, k) (1 − q)^{α−k} q^k exp((k² − k) / (2σ²))
// (Mironov, Talwar and Zhang 2019, Sec. 3.3), summed in log space. q = 1
// gives the plain Gaussian mechanism's α / (2σ²) (Mironov 2017).
double SampledGaussianRdp(double sample_rate, double noise_multiplier, int64_t steps, int order);

// RDP of order `order` (an integer >= 2) of a mechanism with RDP ε(·)
// applied to a Poisson sample at rate q, for any mechanism: the general
// upper bound of Zhu and Wang, ICML 2019, Thm. 5,
// (1/(α−1)) log((1−q)^{α−1}(αq − q + 1) + C(α,2) q² (1−q)^{α−2} e^{ε(2)}
//   + 3 Σ_{l=3..α} C(α,l) (1−q)^{α−l} q^l e^{(l−1) ε(l)}),
// and never above ε(α) itself. For the Gaussian at α = 2 it equals the
// tight SampledGaussianRdp.
double PoissonSubsampledRdp(double sample_rate, int order, const std::function<double(int)>& rdp);

struct EpsilonAtOrder {
  double epsilon = 0;
  double order = 0;  // 0 when no conversion was needed (ε = 0: nothing released)
};

// The smallest ε over `orders` for which RDP ε_α implies (ε, δ)-DP, using the
// conversion ε = ε_α + log(1 − 1/α) − (log δ + log α) / (α − 1) (Balle et
// al. 2020, Thm. 21; Canonne, Kamath and Steinke 2020), never below 0.
// RDP 0 at every order (no step, or sampling rate 0) gives ε = 0, order 0:
// the output is independent of the data.
EpsilonAtOrder EpsilonFromRdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                              double delta);

// ε of the sampled Gaussian mechanism over integer orders 2..256.
EpsilonAtOrder SampledGaussianEpsilon(double sample_rate, double noise_multiplier, int64_t steps,
                                      double delta);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_RDP_H_
