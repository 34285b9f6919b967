#ifndef FEDPROF_PRIVACY_UPDATE_CLIPPING_H_
#define FEDPROF_PRIVACY_UPDATE_CLIPPING_H_

// The client's half of user-level DP (aggregation/dp_fedavg.h): its update
// w_k − θ clipped to the round's norm C before anything leaves it, and the
// norm the server re-checks with the same arithmetic.

#include "fedprof/core/params.h"

namespace fedprof {

// ||w − start||₂, summed in index order in double: the same bits wherever
// it is computed (client, server, any thread).
double UpdateNorm(const FlatParams& start, const FlatParams& w);

// Clips the update w − start to L2 norm `clip` (> 0), keeping its
// direction: afterwards UpdateNorm(start, *w) <= clip holds exactly, float
// rounding included. Returns whether the update was within `clip` before
// (Andrew et al.'s indicator b_k; then *w is unchanged).
bool ClipUpdate(const FlatParams& start, double clip, FlatParams* w);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_UPDATE_CLIPPING_H_
