#include "fedprof/client/packaging.h"

#include <utility>

#include "fedprof/protocol/sketch.h"

namespace fedprof {

void PackageUpdate(const ReportRequest& request, const Attack& attack, const FlatParams& start,
                   FlatParams trained, FitResult* result) {
  result->params = std::move(trained);
  ApplyAttack(attack, start, &result->params);
  if (request.sketch_dim > 0) {
    result->sketch = UpdateSketch(result->params, start, request.sketch_dim);
  }
}

}  // namespace fedprof
