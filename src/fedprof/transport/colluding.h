#ifndef FEDPROF_TRANSPORT_COLLUDING_H_
#define FEDPROF_TRANSPORT_COLLUDING_H_

#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/client/attack.h"
#include "fedprof/transport/forwarding.h"

namespace fedprof {

// The colluding attackers of attack.kind = alie | ipm | min_max | min_sum |
// tailored (docs/robustness.md), around the transport a run's server uses
// (simulate, launch, a deployment alike): every call passes through, but in
// a training Fit the trained results of the round's attackers wait until
// the honest ones are in; then each attacker's model becomes θ +
// ColludingUpdate of the honest updates (by client id), and they go on in
// client id order. With no honest result in the round, the attackers' own
// trained updates stand in for them. Results that come only summed (relays)
// pass as they are. Tailored attackers evaluate `rule`'s estimate
// (Aggregator::EstimateOf) of the honest models and theirs.
class ColludingTransport final : public ForwardingTransport {
 public:
  // `inner` and `rule` outlive this.
  ColludingTransport(Transport& inner, AttackPlan plan, const Aggregator& rule)
      : ForwardingTransport(inner), plan_(std::move(plan)), rule_(rule) {}

  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;

 private:
  AttackPlan plan_;
  const Aggregator& rule_;
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_COLLUDING_H_
