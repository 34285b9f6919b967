// Exact model sums as ranks exchange them (aggregation/model_sum.h).
// Input: a serialised ModelSum. One that parses must serialise back to the
// same bytes, merge with itself (as two ranks' shares), and give every
// value of the average without overflow or undefined behaviour.

#include <cmath>

#include "fedprof/aggregation/model_sum.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const std::string bytes = fuzz::Bytes(data, size);
  return fuzz::Run([&] {
    ModelSum sum = ModelSum::Parse(bytes, "rank 1");
    FUZZ_CHECK(sum.Serialize() == bytes, "model sum did not round-trip");
    const ModelSum copy = sum;
    sum.Merge(copy);
    for (size_t i = 0; i < sum.size(); ++i) {
      FUZZ_CHECK(std::isfinite(sum.Centered(i, 0.0f)), "non-finite sum");
      if (sum.weight() > 0) (void)sum.Centered(i, 1.0f);
    }
  });
}
