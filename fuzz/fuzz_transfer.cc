// FbFTL transfer messages (proto/transfer.proto) and their decoder
// (fbftl/compression.h: top-k indices, q-bit codes, dense values), as the
// server receives them. Input: a selector byte, then the message bytes:
//   0: a GradientUpload of at most 256 values; 1: a FeatureUpload of 64;
//   2: a Download; 3: bare Values. A decoded vector has the announced length;
//   a quantised one stays within [low, high].

#include <cmath>

#include "fedprof/fbftl/compression.h"
#include "fuzz/fuzz_common.h"
#include "transfer.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 1) return 0;
  const uint8_t selector = data[0] % 4;
  const std::string bytes = fuzz::Bytes(data + 1, size - 1);
  return fuzz::Run([&] {
    wire::Values values;
    int64_t max_length = 256;
    switch (selector) {
      case 0: {
        wire::GradientUpload up;
        if (!up.ParseFromString(bytes)) return;
        (void)DecodeValues(up.smashed(), 256, "smashed data");
        values = up.gradient();
        break;
      }
      case 1: {
        wire::FeatureUpload up;
        if (!up.ParseFromString(bytes)) return;
        values = up.features();
        max_length = 64;
        break;
      }
      case 2: {
        wire::Download down;
        if (!down.ParseFromString(bytes)) return;
        values = down.values();
        break;
      }
      default:
        if (!values.ParseFromString(bytes)) return;
        break;
    }
    const int64_t bits = WireValueBits(values);
    FUZZ_CHECK(bits >= 0, "negative wire size");
    const std::vector<float> v = DecodeValues(values, max_length, "upload");
    FUZZ_CHECK(v.size() == values.length(), "decoded length");
    if (values.bits() > 0 && values.bits() < 32) {
      const float lo = std::min(values.low(), values.high());
      const float hi = std::max(values.low(), values.high());
      for (float x : v) FUZZ_CHECK(x == 0 || (x >= lo && x <= hi), "value outside [low, high]");
    }
  });
}
