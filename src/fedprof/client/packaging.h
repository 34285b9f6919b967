#ifndef FEDPROF_CLIENT_PACKAGING_H_
#define FEDPROF_CLIENT_PACKAGING_H_

// Client::Fit's last step: what leaves the client after training.

#include "fedprof/client/attack.h"
#include "fedprof/core/params.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

// Puts the model the client sends into result->params: `trained`, or under a
// simulated attack (client/attack.h) the attack's model built from the
// update trained − `start`, its update clipped to `clip_norm` when > 0
// (user-level DP; result->within_clip says whether it needed none); and
// when request.sketch_dim > 0 a count sketch
// of what is sent minus `start` into result->sketch. `start` is what
// training started from (θ, or under FedBN θ with the client's batch norm),
// so the update is what training changed; an attacker poisons its sketch
// too.
void PackageUpdate(const ReportRequest& request, const Attack& attack, double clip_norm,
                   const FlatParams& start, FlatParams trained, FitResult* result);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_PACKAGING_H_
