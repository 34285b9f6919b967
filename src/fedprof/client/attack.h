#ifndef FEDPROF_CLIENT_ATTACK_H_
#define FEDPROF_CLIENT_ATTACK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/core/params.h"

namespace fedprof {

// Simulated poisoning by authenticated clients, for experiments with
// robust aggregation (docs/robustness.md). An attacker trains on its own
// data (honestly, or on flipped labels), then returns a model built from
// its update Δ = w − θ, with its true sample count:
enum class AttackKind {
  kNone,
  kScale,      // θ + λΔ: a boosted update (model replacement)
  kSignFlip,   // θ − λΔ: against the direction its data wants
  kLabelFlip,  // trains on labels c → C − 1 − c, and returns that model
  // A share of its images carry a trigger and the target label; returns
  // θ + λΔ (model replacement, Bagdasaryan et al., AISTATS 2020): client/backdoor.h.
  kBackdoor,
  // Colluding attackers (ColludingUpdate) who see the round's honest
  // updates: the strongest threat model of the papers.
  kAlie,    // "A little is enough" (Baruch et al., NeurIPS 2019)
  kIpm,     // inner-product manipulation (Xie et al., UAI 2019)
  kMinMax,  // Shejwalkar and Houmansadr, NDSS 2021
  kMinSum,  // the same paper
  // The same paper's aggregation-tailored attack: it optimises against the
  // aggregator in use, whose estimate it evaluates (a Defence).
  kTailored,
};

// Which direction p the tailored attack pushes along (Shejwalkar and
// Houmansadr 2021, Sec. IV-A), from the honest mean μ and sd σ.
enum class Perturbation {
  kStd,   // −σ/||σ||
  kUnit,  // −μ/||μ||
  kSign,  // −sign(μ), scaled to unit length
};

struct Attack {
  AttackKind kind = AttackKind::kNone;
  double scale = 1;  // λ; IPM's ε
  double z = -1;     // ALIE's z; < 0: z_max of the paper
  int64_t target = 0;       // backdoor: the label triggered images get
  double poison_share = 0;  // backdoor: the share of an attacker's images triggered
  Perturbation perturbation = Perturbation::kStd;  // tailored

  bool active() const { return kind != AttackKind::kNone; }
  // Whether the attackers' models are crafted together from the round's
  // honest updates (ColludingUpdate) rather than by each attacker.
  bool colluding() const {
    return kind == AttackKind::kAlie || kind == AttackKind::kIpm || kind == AttackKind::kMinMax ||
           kind == AttackKind::kMinSum || kind == AttackKind::kTailored;
  }
};

// "scale" | "sign_flip" | "label_flip" | "backdoor" | "alie" | "ipm" |
// "min_max" | "min_sum" | "tailored"; throws fedprof::Error naming
// attack.kind otherwise.
AttackKind ParseAttackKind(const std::string& name);
// "std" | "unit" | "sign"; throws naming attack.perturbation otherwise.
Perturbation ParsePerturbation(const std::string& name);

// What the tailored attackers know of the defence: the aggregator's
// estimate of the round's update (ŵ − θ) when every attacker sends
// `crafted` and the honest clients their updates; none when the server
// would not take the clients' estimate but its own step (robust.fallback).
using Defence = std::function<std::optional<std::vector<double>>(const std::vector<double>& crafted)>;

// The update every colluding attacker of a round returns (Δ_mal; its model
// is θ + Δ_mal), from the round's honest updates (at least one) and the
// round's n results of which f are the attackers'. With μ and σ the honest
// updates' coordinate-wise mean and standard deviation:
//   ALIE:    μ − z σ, z = attack.z or z_max = Φ⁻¹((n − s)/n), s = ⌊n/2 + 1⌋ − f
//            (Baruch et al. 2019, Alg. 3);
//   IPM:     −ε μ, ε = attack.scale (Xie et al. 2019, Sec. 4);
//   min-max: μ − γ σ/||σ|| with the largest γ whose maximum distance to an
//            honest update is at most the largest distance between two
//            (Shejwalkar and Houmansadr 2021, Eq. 5, the "std" perturbation);
//   min-sum: the same with the sum of squared distances to the honest ones at
//            most the largest such sum of an honest update (Eq. 6).
//   tailored: μ + γ p, p = attack.perturbation, with the γ whose estimate
//            by `defence` lies furthest from μ (the paper's Alg. 1 with
//            its aggregation-tailored objective ||μ − f_agr||: a step
//            succeeds when it moves the estimate further than the best γ
//            so far); an estimate the server would replace by its own step
//            moves nothing (the attackers know the defence and evade it).
// γ by the paper's halving search from γ = 10 to a step of 1e-5 (Alg. 1).
// The honest updates are taken in the order given (the caller sorts them
// by client id), so the result never depends on arrival order.
std::vector<double> ColludingUpdate(const Attack& attack, const std::vector<std::vector<double>>& honest,
                                    int round_results, int attackers, const Defence& defence = nullptr);

// Replaces the trained model `params` by the attack's, from the model
// `base` training started from (scale, sign_flip, backdoor; the other kinds
// leave it: label flipping poisons the data, the colluding kinds are crafted
// after the round's honest results are in). `params` and `base` have the same size.
void ApplyAttack(const Attack& attack, const FlatParams& base, FlatParams* params);

// Which of `num_clients` clients attack: round(share · N) of them, drawn
// from the seed alone (Stream::kAttackers), so the simulation, every rank
// of a launch and a deployment client built from the same config agree.
std::vector<char> ChooseAttackers(int num_clients, double share, uint64_t seed);

// The attack.* options: the attack and who carries it out, one entry per
// client (all inactive when attack.share = 0).
struct AttackPlan {
  Attack attack;
  std::vector<char> attackers;  // per client id

  const Attack& For(int client) const;
};
AttackPlan MakeAttackPlan(const RunOptions::Attack& options, int64_t seed, int num_clients);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_ATTACK_H_
