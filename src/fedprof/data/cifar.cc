// CIFAR-10 binary batches.

#include <torch/torch.h>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/core/files.h"
#include "fedprof/data/loaders.h"

namespace fedprof {
namespace {

constexpr int64_t kChannels = 3;
constexpr int64_t kSide = 32;
constexpr int64_t kPixelBytes = kChannels * kSide * kSide;
constexpr int64_t kRecordBytes = 1 + kPixelBytes;
constexpr int64_t kCifarClasses = 10;

}  // namespace

Dataset LoadCifar10(const std::vector<std::string>& paths) {
  std::vector<NamedBytes> files;
  files.reserve(paths.size());
  for (const std::string& path : paths) files.push_back({path, ReadFile(path)});
  return DecodeCifar10(std::move(files));
}

Dataset DecodeCifar10(std::vector<NamedBytes> named) {
  if (named.empty()) throw Error("CIFAR-10: no files given");

  // Validate every file before allocating the tensor, so nothing partial is
  // ever built; the raw bytes are far smaller than the float tensor.
  std::vector<std::string> files;
  files.reserve(named.size());
  int64_t total = 0;
  for (NamedBytes& file : named) {
    const std::string& path = file.name;
    std::string bytes = MaybeGunzip(path, std::move(file.bytes));
    const auto size = static_cast<int64_t>(bytes.size());
    if (size == 0) {
      throw Error(path + ": byte 0: empty file, expected records of " +
                  std::to_string(kRecordBytes) + " bytes");
    }
    if (size % kRecordBytes != 0) {
      const int64_t complete = size / kRecordBytes;
      throw Error(path + ": byte " + std::to_string(complete * kRecordBytes) +
                  ": record " + std::to_string(complete) +
                  " is truncated; file size " + std::to_string(size) +
                  " is not a multiple of " + std::to_string(kRecordBytes) +
                  " (1 label byte + 3072 pixel bytes)");
    }
    const int64_t records = size / kRecordBytes;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    for (int64_t r = 0; r < records; ++r) {
      const int label = p[r * kRecordBytes];
      if (label >= kCifarClasses) {
        throw Error(path + ": byte " + std::to_string(r * kRecordBytes) +
                    ": record " + std::to_string(r) + " has label " +
                    FileText(std::to_string(label)) + ", expected 0..9");
      }
    }
    total += records;
    files.push_back(std::move(bytes));
  }

  std::array<float, 256> unit{};
  for (int i = 0; i < 256; ++i) unit[i] = static_cast<float>(i) / 255.0f;

  Dataset data;
  data.x = torch::empty({total, kChannels, kSide, kSide}, torch::kFloat32);
  data.y = torch::empty({total}, torch::kInt64);
  float* x = data.x.data_ptr<float>();
  int64_t* y = data.y.data_ptr<int64_t>();
  for (const std::string& bytes : files) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const auto records = static_cast<int64_t>(bytes.size()) / kRecordBytes;
    // Pixels are stored channel-major (R plane, G plane, B plane), which is
    // exactly the [3, 32, 32] layout.
    for (int64_t r = 0; r < records; ++r) {
      const unsigned char* record = p + r * kRecordBytes;
      *y++ = record[0];
      for (int64_t i = 0; i < kPixelBytes; ++i) x[i] = unit[record[1 + i]];
      x += kPixelBytes;
    }
  }
  data.num_classes = kCifarClasses;
  data.name =
      named.size() == 1
          ? named[0].name
          : named[0].name + " (+" + std::to_string(named.size() - 1) + " more)";
  return data;
}

}  // namespace fedprof
