#include "fedprof/client/packaging.h"

#include <utility>

#include "fedprof/privacy/update_clipping.h"
#include "fedprof/protocol/sketch.h"

namespace fedprof {

void PackageUpdate(const ReportRequest& request, const Attack& attack, double clip_norm,
                   const FlatParams& start, FlatParams trained, FitResult* result) {
  result->params = std::move(trained);
  ApplyAttack(attack, start, &result->params);
  if (clip_norm > 0) result->within_clip = ClipUpdate(start, clip_norm, &result->params);
  if (request.sketch_dim > 0) {
    result->sketch = UpdateSketch(result->params, start, request.sketch_dim);
  }
}

}  // namespace fedprof
