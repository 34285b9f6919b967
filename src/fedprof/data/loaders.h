#ifndef FEDPROF_DATA_LOADERS_H_
#define FEDPROF_DATA_LOADERS_H_

#include <string>
#include <vector>

#include "fedprof/data/dataset.h"

namespace fedprof {

// All loaders throw fedprof::Error with one line naming the file, the place
// (byte offset, record, or line:column) and what was expected, e.g.
//   "data/x-idx3-ubyte: byte 0: bad magic 0x00000000, expected 0x00000803 (IDX images)"
// They never return partial data.

// IDX image file + IDX label file (MNIST, Fashion-MNIST, EMNIST). Either file
// may be gzip-compressed (detected by content, not by name). Images become
// float32 [n, 1, rows, cols] in [0, 1]; labels int64 [n]. num_classes is
// max(label) + 1 unless `num_classes` > 0, in which case a label >= num_classes
// is an error naming its index. `first` > 0 keeps only the first `first`
// images (every label is still read and checked, so num_classes is the whole
// file's); of a gzipped image file only as much is decoded, so the rest of
// it, and its checksum, are never read.
Dataset LoadIdx(const std::string& images_path, const std::string& labels_path,
                int64_t num_classes = 0, int64_t first = 0);

// CIFAR-10 binary format: records of 1 label byte + 3072 pixel bytes
// (3x32x32, channel-major). Images float32 [n, 3, 32, 32] in [0, 1].
// A file whose size is not a multiple of 3073, or a label > 9, is an error.
Dataset LoadCifar10(const std::vector<std::string>& paths);

// CSV with a header row and numeric cells. `targets` names the target
// column(s); every other column is a feature. Classification (one target
// column of non-negative integers): y int64 [n]. Regression: y float32
// [n, targets]. A non-numeric or missing cell is an error naming line and
// column; an unknown target name is an error listing the header.
struct CsvOptions {
  std::vector<std::string> targets;
  bool classification = false;
};
Dataset LoadCsv(const std::string& path, const CsvOptions& options);

// Reads a whole file, transparently gunzipping it when it starts with the
// gzip magic. Errors name the file.
std::string ReadMaybeGzipped(const std::string& path);

// The same loaders on contents already in memory, `name` standing for the
// file in every message: what the file loaders call once they have read
// their files, and what the fuzz targets drive (fuzz/). Contents may be
// gzip-compressed, as files may.
struct NamedBytes {
  std::string name;
  std::string bytes;
};
std::string MaybeGunzip(const std::string& name, std::string bytes);
Dataset DecodeIdx(const NamedBytes& images, const NamedBytes& labels, int64_t num_classes = 0,
                  int64_t first = 0);
Dataset DecodeCifar10(std::vector<NamedBytes> files);
Dataset ParseCsv(const NamedBytes& file, const CsvOptions& options);

}  // namespace fedprof

#endif  // FEDPROF_DATA_LOADERS_H_
