#ifndef FEDPROF_CLIENT_ATTACK_H_
#define FEDPROF_CLIENT_ATTACK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/core/params.h"

namespace fedprof {


// Simulated model poisoning by authenticated clients, for experiments with
// robust aggregation (docs/robustness.md). An attacker trains honestly on
// its own data, then returns a model built from its update Δ = w − θ, with
// its true sample count:
enum class AttackKind {
  kNone,
  kScale,     // θ + λΔ: a boosted update (model replacement)
  kSignFlip,  // θ − λΔ: against the direction its data wants
};

struct Attack {
  AttackKind kind = AttackKind::kNone;
  double scale = 1;  // λ

  bool active() const { return kind != AttackKind::kNone; }
};

// "scale" | "sign_flip"; throws fedprof::Error naming attack.kind otherwise.
AttackKind ParseAttackKind(const std::string& name);

// Replaces the trained model `params` by the attack's, from the model
// `base` training started from. `params` and `base` have the same size.
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
