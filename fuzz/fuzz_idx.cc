// IDX image + label files (MNIST family), raw or gzip-compressed.
// Input: 1 byte num_classes (0: inferred), 4 bytes little-endian length of
// the image file, the image file, then the label file.

#include <torch/torch.h>

#include "fedprof/data/loaders.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 5) return 0;
  const int64_t num_classes = data[0];
  size_t images_size = data[1] | (data[2] << 8) | (data[3] << 16) | (size_t{data[4]} << 24);
  images_size = std::min(images_size, size - 5);
  const NamedBytes images{"images-idx3-ubyte", fuzz::Bytes(data + 5, images_size)};
  const NamedBytes labels{"labels-idx1-ubyte",
                          fuzz::Bytes(data + 5 + images_size, size - 5 - images_size)};
  return fuzz::Run([&] {
    const Dataset d = DecodeIdx(images, labels, num_classes);
    // What the header promised, in [0, 1], with labels in range.
    FUZZ_CHECK(d.x.dim() == 4 && d.x.size(0) == d.y.size(0) && d.x.size(0) > 0, "shape");
    FUZZ_CHECK(d.x.min().item<float>() >= 0 && d.x.max().item<float>() <= 1, "pixel range");
    FUZZ_CHECK(d.y.min().item<int64_t>() >= 0 && d.y.max().item<int64_t>() < d.num_classes,
               "label range");
    if (num_classes > 0) FUZZ_CHECK(d.num_classes == num_classes, "num_classes");
  });
}
