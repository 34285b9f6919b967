#ifndef FEDPROF_PROTOCOL_SKETCH_H_
#define FEDPROF_PROTOCOL_SKETCH_H_

#include <vector>

#include "fedprof/core/params.h"

namespace fedprof {

// Count sketch (Charikar et al. 2002) of the update w − θ in `dim` buckets:
// value i adds ±(w_i − θ_i) to bucket h(i), sign and bucket from one hash of
// i. Inner products of sketches estimate those of the updates, so a server
// can compare clients' updates without keeping their models. Computed by
// the client, where the update is made. Throws fedprof::Error for dim < 1
// or models of different sizes.
std::vector<float> UpdateSketch(const FlatParams& w, const FlatParams& global, int dim);

}  // namespace fedprof

#endif  // FEDPROF_PROTOCOL_SKETCH_H_
