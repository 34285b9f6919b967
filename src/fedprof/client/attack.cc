#include "fedprof/client/attack.h"

#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {

AttackKind ParseAttackKind(const std::string& name) {
  if (name == "scale") return AttackKind::kScale;
  if (name == "sign_flip") return AttackKind::kSignFlip;
  throw Error("attack.kind: '" + name + "' is not one of scale|sign_flip");
}

void ApplyAttack(const Attack& attack, const FlatParams& base, FlatParams* params) {
  if (!attack.active()) return;
  if (params->size() != base.size()) {
    throw Error("attack: a model of " + std::to_string(params->size()) + " values from one of " +
                std::to_string(base.size()));
  }
  const double lambda = attack.kind == AttackKind::kSignFlip ? -attack.scale : attack.scale;
  for (size_t i = 0; i < base.size(); ++i) {
    const double update = static_cast<double>((*params)[i]) - base[i];
    (*params)[i] = static_cast<float>(base[i] + lambda * update);
  }
}

std::vector<char> ChooseAttackers(int num_clients, double share, uint64_t seed) {
  std::vector<char> attackers(static_cast<size_t>(std::max(0, num_clients)), 0);
  const auto count = static_cast<int64_t>(std::llround(share * num_clients));
  if (count <= 0) return attackers;  // no draw: share 0 touches nothing
  Rng rng = MakeRng(seed, Stream::kAttackers);
  const std::vector<int64_t> order = Permutation(rng, num_clients);
  for (int64_t k = 0; k < count && k < num_clients; ++k) attackers[order[k]] = 1;
  return attackers;
}

const Attack& AttackPlan::For(int client) const {
  static const Attack kHonest;
  return client >= 0 && static_cast<size_t>(client) < attackers.size() && attackers[client]
             ? attack
             : kHonest;
}

AttackPlan MakeAttackPlan(const RunOptions::Attack& options, int64_t seed, int num_clients) {
  AttackPlan plan;
  plan.attack.kind = ParseAttackKind(options.kind);
  plan.attack.scale = options.scale;
  plan.attackers = ChooseAttackers(num_clients, options.share,
                                   static_cast<uint64_t>(seed));
  return plan;
}

}  // namespace fedprof
