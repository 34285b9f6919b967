// Numeric CSV tables. Input: a first line "c|r:<target>[,<target>...]"
// (classification or regression, the target columns), then the CSV file.

#include <torch/torch.h>

#include "fedprof/core/text.h"
#include "fedprof/data/loaders.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const auto parts = fuzz::SplitAt(fuzz::Bytes(data, size), "\n");
  const std::string& options_line = parts.first;
  const std::string& text = parts.second;
  if (options_line.size() < 2 || options_line[1] != ':') return 0;
  CsvOptions options;
  options.classification = options_line[0] == 'c';
  options.targets = SplitList(options_line.substr(2));
  return fuzz::Run([&] {
    const Dataset d = ParseCsv({"table.csv", text}, options);
    FUZZ_CHECK(d.x.dim() == 2 && d.x.size(0) == d.y.size(0) && d.x.size(0) > 0, "rows");
    // Every value the file gave is a finite float32.
    FUZZ_CHECK(torch::isfinite(d.x).all().item<bool>(), "non-finite feature");
    if (options.classification) {
      FUZZ_CHECK(d.y.min().item<int64_t>() >= 0 && d.y.max().item<int64_t>() < d.num_classes,
                 "label range");
    } else {
      FUZZ_CHECK(torch::isfinite(d.y).all().item<bool>(), "non-finite target");
    }
  });
}
