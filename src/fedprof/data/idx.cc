// IDX files (MNIST family) and the shared gzip-aware file reader.

#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/core/files.h"
#include "fedprof/data/loaders.h"

namespace fedprof {
namespace {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
constexpr size_t kImagesHeaderBytes = 16;
constexpr size_t kLabelsHeaderBytes = 8;

// The whole stream, or (`prefix` > 0) its first `prefix` bytes at most: the
// decoder stops there, so the rest of the stream and its checksum are not
// read.
std::string Gunzip(const std::string& path, const std::string& compressed, size_t prefix = 0) {
  // The gzip trailer holds the uncompressed size mod 2^32: a good first guess.
  // Deflate expands at most ~1032:1, which bounds the guess when the trailer
  // is garbage (a truncated or corrupt file).
  size_t guess = compressed.size() * 4;
  if (compressed.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(
        compressed.data() + compressed.size() - 4);
    const uint32_t isize =
        t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<uint32_t>(t[3]) << 24);
    guess = std::min<size_t>(isize, compressed.size() * 1032);
  }
  if (prefix > 0) guess = std::min(guess, prefix);
  std::string out(std::max<size_t>(guess, 1024), '\0');

  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    throw Error(path + ": cannot initialise zlib");
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  size_t in_left = compressed.size();
  size_t produced = 0;
  int rc = Z_OK;
  for (;;) {
    if (prefix > 0 && produced >= prefix) break;
    if (produced == out.size()) out.resize(out.size() * 2);
    // zlib counts in uInt; feed at most 1 GiB per call.
    const uInt in_chunk =
        static_cast<uInt>(std::min<size_t>(in_left, size_t{1} << 30));
    size_t room = out.size() - produced;
    if (prefix > 0) room = std::min(room, prefix - produced);
    const uInt out_chunk = static_cast<uInt>(std::min<size_t>(room, size_t{1} << 30));
    zs.avail_in = in_chunk;
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = out_chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    produced += out_chunk - zs.avail_out;
    const size_t offset = compressed.size() - in_left;
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are valid gzip; keep going if more follow.
      if (in_left == 0) break;
      if (inflateReset(&zs) != Z_OK) {
        inflateEnd(&zs);
        throw Error(path + ": byte " + std::to_string(offset) +
                    ": cannot restart gzip decoder");
      }
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR ||
        rc == Z_STREAM_ERROR) {
      const std::string detail = zs.msg ? zs.msg : "zlib error";
      inflateEnd(&zs);
      throw Error(path + ": byte " + std::to_string(offset) +
                  ": corrupt gzip stream (" + detail +
                  "), expected valid deflate data");
    }
    if (in_left == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      throw Error(path + ": byte " + std::to_string(offset) +
                  ": truncated gzip stream, expected more compressed data");
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  return out;
}

bool IsGzip(const std::string& bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

uint32_t ReadBigEndian32(const std::string& bytes, size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data() + offset);
  return (static_cast<uint32_t>(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) |
         p[3];
}

std::string Hex32(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", value);
  return buf;
}

// Exact byte/255 values, so the conversion loop is one table lookup.
const std::array<float, 256>& ByteToUnit() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = static_cast<float>(i) / 255.0f;
    return t;
  }();
  return table;
}

void CheckHeader(const std::string& path, const std::string& bytes,
                 size_t header_bytes, uint32_t magic, const char* what) {
  if (bytes.size() < header_bytes) {
    throw Error(path + ": byte " + std::to_string(bytes.size()) +
                ": truncated header, expected " + std::to_string(header_bytes) +
                " bytes (" + what + "), found " + std::to_string(bytes.size()));
  }
  const uint32_t found = ReadBigEndian32(bytes, 0);
  if (found != magic) {
    throw Error(path + ": byte 0: bad magic " + FileText(Hex32(found)) + ", expected " +
                Hex32(magic) + " (" + what + ")");
  }
}

}  // namespace

std::string MaybeGunzip(const std::string& name, std::string bytes) {
  if (IsGzip(bytes)) return Gunzip(name, bytes);
  return bytes;
}

std::string ReadMaybeGzipped(const std::string& path) {
  return MaybeGunzip(path, ReadFile(path));
}

Dataset LoadIdx(const std::string& images_path, const std::string& labels_path,
                int64_t num_classes, int64_t first) {
  NamedBytes images{images_path, ReadFile(images_path)};
  NamedBytes labels{labels_path, ReadFile(labels_path)};
  return DecodeIdx(images, labels, num_classes, first);
}

Dataset DecodeIdx(const NamedBytes& images_file, const NamedBytes& labels_file,
                  int64_t num_classes, int64_t first) {
  const std::string& images_path = images_file.name;
  const std::string& labels_path = labels_file.name;
  // A gzipped file is decoded only as far as the images kept: its header
  // first, which says how far that is.
  const bool gzipped = IsGzip(images_file.bytes);
  std::string images = gzipped && first > 0 ? Gunzip(images_path, images_file.bytes, kImagesHeaderBytes)
                                            : MaybeGunzip(images_path, images_file.bytes);
  CheckHeader(images_path, images, kImagesHeaderBytes, kIdxImagesMagic,
              "IDX images");
  const uint64_t n = ReadBigEndian32(images, 4);
  const uint64_t rows = ReadBigEndian32(images, 8);
  const uint64_t cols = ReadBigEndian32(images, 12);
  if (n == 0 || rows == 0 || cols == 0) {
    throw Error(images_path + ": byte 4: dimensions " + FileText(std::to_string(n)) +
                " x " + FileText(std::to_string(rows)) + " x " + FileText(std::to_string(cols)) +
                ", expected all non-zero");
  }
  // Each factor is below 2^32, so rows * cols fits; n * pixels may not.
  const uint64_t pixels = rows * cols;
  const uint64_t kept = first > 0 ? std::min<uint64_t>(n, static_cast<uint64_t>(first)) : n;
  // The prefix decoded holds at most the kept images: a shorter one is a
  // truncated file, and what lies past it is not read (nor its checksum).
  const bool prefix_only = gzipped && first > 0 && kept < n;
  if (gzipped && first > 0) {
    images = prefix_only ? Gunzip(images_path, images_file.bytes, kImagesHeaderBytes + kept * pixels)
                         : MaybeGunzip(images_path, images_file.bytes);
  }
  const uint64_t available = images.size() - kImagesHeaderBytes;
  const uint64_t needed = prefix_only ? kept : n;
  if (needed > available / pixels || (!prefix_only && available != n * pixels)) {
    const std::string promised = std::to_string(n) + " images of " +
                                 std::to_string(rows) + "x" +
                                 std::to_string(cols);
    if (needed > available / pixels) {
      throw Error(images_path + ": byte " + std::to_string(images.size()) +
                  ": truncated file, header promises " + promised +
                  " after the 16-byte header, found only " +
                  std::to_string(available) + " data bytes");
    }
    throw Error(images_path + ": byte " +
                std::to_string(kImagesHeaderBytes + n * pixels) +
                ": unexpected trailing data, header promises " + promised +
                " but the file has " + std::to_string(available - n * pixels) +
                " extra bytes");
  }

  const std::string labels = MaybeGunzip(labels_path, labels_file.bytes);
  CheckHeader(labels_path, labels, kLabelsHeaderBytes, kIdxLabelsMagic,
              "IDX labels");
  const uint64_t num_labels = ReadBigEndian32(labels, 4);
  if (num_labels != n) {
    throw Error(labels_path + ": byte 4: label count " +
                std::to_string(num_labels) + " does not match image count " +
                std::to_string(n) + " in " + images_path);
  }
  const uint64_t label_bytes = labels.size() - kLabelsHeaderBytes;
  if (label_bytes != n) {
    throw Error(labels_path + ": byte " + std::to_string(labels.size()) +
                (label_bytes < n
                     ? ": truncated file, header promises "
                     : ": unexpected trailing data, header promises ") +
                std::to_string(n) + " labels after the 8-byte header, found " +
                std::to_string(label_bytes) + " data bytes");
  }

  const auto* label_data = reinterpret_cast<const unsigned char*>(
      labels.data() + kLabelsHeaderBytes);
  int64_t max_label = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t label = label_data[i];
    if (num_classes > 0 && label >= num_classes) {
      throw Error(labels_path + ": byte " +
                  std::to_string(kLabelsHeaderBytes + i) + ": label " +
                  std::to_string(label) + " of sample " + std::to_string(i) +
                  " is out of range, expected 0.." +
                  std::to_string(num_classes - 1));
    }
    max_label = std::max(max_label, label);
  }

  const auto count = static_cast<int64_t>(kept);
  Dataset data;
  data.x = torch::empty(
      {count, 1, static_cast<int64_t>(rows), static_cast<int64_t>(cols)},
      torch::kFloat32);
  data.y = torch::empty({count}, torch::kInt64);
  const auto& unit = ByteToUnit();
  const auto* pixel_data = reinterpret_cast<const unsigned char*>(
      images.data() + kImagesHeaderBytes);
  float* x = data.x.data_ptr<float>();
  const uint64_t total = kept * pixels;
  for (uint64_t i = 0; i < total; ++i) x[i] = unit[pixel_data[i]];
  int64_t* y = data.y.data_ptr<int64_t>();
  for (uint64_t i = 0; i < kept; ++i) y[i] = label_data[i];
  data.num_classes = num_classes > 0 ? num_classes : max_label + 1;
  data.name = images_path;
  return data;
}

}  // namespace fedprof
