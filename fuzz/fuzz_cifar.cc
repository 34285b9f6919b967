// CIFAR-10 binary batches, raw or gzip-compressed. Input: one file, or two
// when it contains the separator "\n--next-file--\n".

#include <torch/torch.h>

#include "fedprof/data/loaders.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const auto [first, second] = fuzz::SplitAt(fuzz::Bytes(data, size), "\n--next-file--\n");
  std::vector<NamedBytes> files = {{"data_batch_1.bin", first}};
  if (second.size() > 0) files.push_back({"data_batch_2.bin", second});
  return fuzz::Run([&] {
    const Dataset d = DecodeCifar10(files);
    FUZZ_CHECK(d.x.dim() == 4 && d.x.size(1) == 3 && d.x.size(2) == 32 && d.x.size(3) == 32,
               "shape");
    FUZZ_CHECK(d.x.size(0) == d.y.size(0) && d.x.size(0) > 0, "records");
    FUZZ_CHECK(d.y.min().item<int64_t>() >= 0 && d.y.max().item<int64_t>() < 10, "label range");
    FUZZ_CHECK(d.x.min().item<float>() >= 0 && d.x.max().item<float>() <= 1, "pixel range");
  });
}
