#include "fedprof/data/loaders.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/data/dataset.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

class LoadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "fedprof_loaders_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string Write(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  std::string WriteGzip(const std::string& name,
                        const std::string& bytes) const {
    const std::string path = Path(name);
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    gzclose(f);
    return path;
  }

  static std::string ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

void PutBigEndian(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v >> 24));
  s.push_back(static_cast<char>(v >> 16));
  s.push_back(static_cast<char>(v >> 8));
  s.push_back(static_cast<char>(v));
}

// Pixel (i, r, c) of image i is (7 * i + 3 * r + c) mod 256.
std::string IdxImages(uint32_t n, uint32_t rows, uint32_t cols,
                      uint32_t magic = 0x00000803) {
  std::string s;
  PutBigEndian(s, magic);
  PutBigEndian(s, n);
  PutBigEndian(s, rows);
  PutBigEndian(s, cols);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t c = 0; c < cols; ++c) {
        s.push_back(static_cast<char>((7 * i + 3 * r + c) % 256));
      }
    }
  }
  return s;
}

std::string IdxLabels(const std::vector<int>& labels,
                      uint32_t magic = 0x00000801) {
  std::string s;
  PutBigEndian(s, magic);
  PutBigEndian(s, static_cast<uint32_t>(labels.size()));
  for (int l : labels) s.push_back(static_cast<char>(l));
  return s;
}

TEST_F(LoadersTest, IdxLoadsPlainFiles) {
  const auto images = Write("img", IdxImages(3, 2, 4));
  const auto labels = Write("lab", IdxLabels({4, 0, 2}));
  const Dataset d = LoadIdx(images, labels);
  ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{3, 1, 2, 4}));
  EXPECT_EQ(d.x.scalar_type(), torch::kFloat32);
  EXPECT_EQ(d.y.scalar_type(), torch::kInt64);
  EXPECT_FLOAT_EQ(d.x[2][0][1][3].item<float>(), (7 * 2 + 3 * 1 + 3) / 255.0f);
  EXPECT_FLOAT_EQ(d.x[0][0][0][0].item<float>(), 0.0f);
  EXPECT_EQ(d.y[0].item<int64_t>(), 4);
  EXPECT_EQ(d.y[2].item<int64_t>(), 2);
  EXPECT_EQ(d.num_classes, 5);  // max label + 1
  EXPECT_EQ(d.name, images);
  EXPECT_TRUE(d.is_image());
}

TEST_F(LoadersTest, IdxGzippedMatchesPlain) {
  const std::string img = IdxImages(20, 5, 6);
  const std::string lab =
      IdxLabels({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  const Dataset plain = LoadIdx(Write("img", img), Write("lab", lab), 10);
  // Compressed images with a plain label file, detected by content.
  const Dataset gz =
      LoadIdx(WriteGzip("img.bin", img), WriteGzip("lab.bin", lab), 10);
  const Dataset mixed =
      LoadIdx(WriteGzip("img2.gz", img), Write("lab2", lab), 10);
  EXPECT_TRUE(torch::equal(plain.x, gz.x));
  EXPECT_TRUE(torch::equal(plain.y, gz.y));
  EXPECT_TRUE(torch::equal(plain.x, mixed.x));
  EXPECT_EQ(gz.num_classes, 10);
  EXPECT_EQ(ReadMaybeGzipped(Path("img.bin")), img);
}

// The first k images, from a plain or a gzipped file, are those of the
// whole file; every label is still read and checked, so the class count is
// the whole file's. Of a gzipped file only the kept images are decoded: a
// file cut after them loads, one cut before them does not.
TEST_F(LoadersTest, IdxFirstImagesAreTheWholeFilesAndOnlyTheyAreDecoded) {
  const std::string img = IdxImages(40, 5, 6);
  std::vector<int> label_values(40, 1);
  label_values[30] = 7;
  const std::string lab = IdxLabels(label_values);
  const Dataset whole = LoadIdx(Write("img", img), Write("lab", lab));
  const std::string gz_path = WriteGzip("img.gz", img);
  for (const std::string& images : {Path("img"), gz_path}) {
    const Dataset first = LoadIdx(images, Path("lab"), 0, 12);
    ASSERT_EQ(first.x.sizes(), (std::vector<int64_t>{12, 1, 5, 6})) << images;
    EXPECT_TRUE(torch::equal(first.x, whole.x.narrow(0, 0, 12))) << images;
    EXPECT_TRUE(torch::equal(first.y, whole.y.narrow(0, 0, 12))) << images;
    EXPECT_EQ(first.num_classes, 8) << images;
    EXPECT_TRUE(torch::equal(LoadIdx(images, Path("lab"), 0, 40).x, whole.x)) << images;
    EXPECT_TRUE(torch::equal(LoadIdx(images, Path("lab"), 0, 99).x, whole.x)) << images;
  }
  // A gzip stream of the first 12 images and a header promising 40: the
  // first 12 load (the rest is never read), the first 13 are truncated.
  const std::string cut = ReadBytes(WriteGzip("cut.gz", img.substr(0, 16 + 12 * 30)));
  const std::string cut_path = Write("cut.gz", cut);
  EXPECT_TRUE(torch::equal(LoadIdx(cut_path, Path("lab"), 0, 12).x, whole.x.narrow(0, 0, 12)));
  ExpectError([&] { LoadIdx(cut_path, Path("lab"), 0, 13); },
              {cut_path, "truncated file, header promises 40 images of 5x6", "found only 360 data bytes"});
  ExpectError([&] { LoadIdx(cut_path, Path("lab")); }, {cut_path, "truncated file"});
  // The labels are checked whole whatever is kept.
  std::vector<int> bad = label_values;
  bad[35] = 10;
  ExpectError([&] { LoadIdx(gz_path, Write("bad", IdxLabels(bad)), 10, 12); },
              {"label 10 of sample 35 is out of range"});
}

TEST_F(LoadersTest, IdxBadMagic) {
  const auto labels = Write("lab", IdxLabels({1, 2}));
  const auto images = Write("img", IdxImages(2, 2, 2, 0x00000801));
  ExpectError(
      [&] { LoadIdx(images, labels); },
      {images, "byte 0", "bad magic 0x00000801", "expected 0x00000803"});
  const auto good_images = Write("img2", IdxImages(2, 2, 2));
  const auto bad_labels = Write("lab2", IdxLabels({1, 2}, 0x00000803));
  ExpectError(
      [&] { LoadIdx(good_images, bad_labels); },
      {bad_labels, "byte 0", "bad magic 0x00000803", "expected 0x00000801"});
}

TEST_F(LoadersTest, IdxTruncated) {
  const auto labels = Write("lab", IdxLabels({1, 2, 3}));
  std::string img = IdxImages(3, 4, 4);
  img.pop_back();
  const auto images = Write("img", img);
  ExpectError(
      [&] { LoadIdx(images, labels); },
      {images, "byte 63", "truncated", "3 images of 4x4", "47 data bytes"});
  const auto header_only = Write("hdr", IdxImages(3, 4, 4).substr(0, 10));
  ExpectError(
      [&] { LoadIdx(header_only, labels); },
      {header_only, "byte 10", "truncated header", "expected 16 bytes"});
  std::string lab = IdxLabels({1, 2, 3});
  lab.pop_back();
  const auto short_labels = Write("lab2", lab);
  const auto good_images = Write("img2", IdxImages(3, 4, 4));
  ExpectError([&] { LoadIdx(good_images, short_labels); },
              {short_labels, "byte 10", "truncated", "3 labels"});
  const auto padded = Write("img3", IdxImages(3, 4, 4) + "xx");
  ExpectError([&] { LoadIdx(padded, labels); },
              {padded, "byte 64", "trailing data", "2 extra bytes"});
}

TEST_F(LoadersTest, IdxMismatchedCounts) {
  const auto images = Write("img", IdxImages(3, 2, 2));
  const auto labels = Write("lab", IdxLabels({1, 2, 3, 4}));
  ExpectError([&] { LoadIdx(images, labels); },
              {labels, "byte 4", "label count 4", "image count 3", images});
}

TEST_F(LoadersTest, IdxLabelOutOfRange) {
  const auto images = Write("img", IdxImages(4, 2, 2));
  const auto labels = Write("lab", IdxLabels({1, 9, 10, 3}));
  ExpectError([&] { LoadIdx(images, labels, 10); },
              {labels, "byte 10", "label 10 of sample 2", "expected 0..9"});
  EXPECT_EQ(LoadIdx(images, labels).num_classes, 11);
}

TEST_F(LoadersTest, MissingFile) {
  const std::string missing = Path("does-not-exist");
  const auto labels = Write("lab", IdxLabels({1}));
  ExpectError([&] { LoadIdx(missing, labels); }, {missing, "cannot open"});
  ExpectError([&] { LoadCifar10({missing}); }, {missing, "cannot open"});
  ExpectError(
      [&] {
        LoadCsv(missing, {{"y"}, false});
      },
      {missing, "cannot open"});
  ExpectError([&] { ReadMaybeGzipped(dir_); }, {dir_, "is a directory"});
}

TEST_F(LoadersTest, CorruptGzip) {
  const std::string img = IdxImages(50, 8, 8);
  const std::string good = ReadBytes(WriteGzip("good.gz", img));
  ASSERT_GT(good.size(), 40u);
  std::string corrupt = good;
  for (size_t i = 12; i < 24; ++i) corrupt[i] = static_cast<char>(0xff);
  const auto corrupt_path = Write("corrupt.gz", corrupt);
  ExpectError([&] { ReadMaybeGzipped(corrupt_path); },
              {corrupt_path, "byte ", "corrupt gzip stream"});
  // A damaged checksum is caught too, so silent bit rot cannot slip through.
  std::string bad_crc = good;
  bad_crc[bad_crc.size() - 6] ^= 0x55;
  const auto crc_path = Write("crc.gz", bad_crc);
  ExpectError([&] { ReadMaybeGzipped(crc_path); },
              {crc_path, "corrupt gzip stream"});
  const auto cut_path = Write("cut.gz", good.substr(0, good.size() / 2));
  ExpectError([&] { ReadMaybeGzipped(cut_path); },
              {cut_path, "byte " + std::to_string(good.size() / 2),
               "truncated gzip stream"});
  const auto labels = Write("lab", IdxLabels(std::vector<int>(50, 1)));
  ExpectError([&] { LoadIdx(corrupt_path, labels); },
              {corrupt_path, "corrupt gzip stream"});
}

TEST_F(LoadersTest, ReadMaybeGzippedPassesPlainBytesThrough) {
  EXPECT_EQ(ReadMaybeGzipped(Write("empty", "")), "");
  EXPECT_EQ(ReadMaybeGzipped(Write("one", "\x1f")), "\x1f");
  const std::string text = "a,b\n1,2\n";
  EXPECT_EQ(ReadMaybeGzipped(Write("t.csv", text)), text);
}

// Record r: label labels[r]; pixel byte i is (r + i) mod 251.
std::string CifarRecords(const std::vector<int>& labels, int first = 0) {
  std::string s;
  for (size_t k = 0; k < labels.size(); ++k) {
    const int r = first + static_cast<int>(k);
    s.push_back(static_cast<char>(labels[k]));
    for (int i = 0; i < 3072; ++i)
      s.push_back(static_cast<char>((r + i) % 251));
  }
  return s;
}

TEST_F(LoadersTest, CifarLoadsSeveralFiles) {
  const auto a = Write("data_batch_1.bin", CifarRecords({3, 9}));
  const auto b = WriteGzip("data_batch_2.bin", CifarRecords({0}, 2));
  const Dataset d = LoadCifar10({a, b});
  ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{3, 3, 32, 32}));
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.y[0].item<int64_t>(), 3);
  EXPECT_EQ(d.y[1].item<int64_t>(), 9);
  EXPECT_EQ(d.y[2].item<int64_t>(), 0);
  // Channel-major: channel c, row y, column x is pixel byte c*1024 + y*32 + x.
  for (int r : {0, 2}) {
    const int i = 2 * 1024 + 5 * 32 + 7;
    EXPECT_FLOAT_EQ(d.x[r][2][5][7].item<float>(), ((r + i) % 251) / 255.0f);
  }
  EXPECT_GE(d.x.min().item<float>(), 0.0f);
  EXPECT_LE(d.x.max().item<float>(), 1.0f);
}

TEST_F(LoadersTest, CifarBadSize) {
  const auto path =
      Write("bad.bin", CifarRecords({1, 2}) + std::string(5, '\0'));
  ExpectError([&] { LoadCifar10({path}); },
              {path, "byte 6146", "record 2", "not a multiple of 3073"});
  const auto empty = Write("empty.bin", "");
  ExpectError([&] { LoadCifar10({empty}); }, {empty, "byte 0", "empty file"});
  ExpectError([] { LoadCifar10({}); }, {"no files"});
}

TEST_F(LoadersTest, CifarBadLabel) {
  const auto good = Write("good.bin", CifarRecords({1}));
  const auto path = Write("bad.bin", CifarRecords({1, 10, 2}));
  ExpectError(
      [&] {
        LoadCifar10({good, path});
      },
      {path, "byte 3073", "record 1", "label 10", "expected 0..9"});
}

TEST_F(LoadersTest, CsvClassification) {
  const auto path = Write("t.csv",
                          "x1, \"x 2\",label\r\n"
                          "1.5,-2,0\r\n"
                          "\r\n"
                          " 3e2 ,+4,2\r\n");
  const Dataset d = LoadCsv(path, {{"label"}, true});
  ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(d.y.sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(d.y.scalar_type(), torch::kInt64);
  EXPECT_FLOAT_EQ(d.x[0][0].item<float>(), 1.5f);
  EXPECT_FLOAT_EQ(d.x[0][1].item<float>(), -2.0f);
  EXPECT_FLOAT_EQ(d.x[1][0].item<float>(), 300.0f);
  EXPECT_FLOAT_EQ(d.x[1][1].item<float>(), 4.0f);
  EXPECT_EQ(d.y[1].item<int64_t>(), 2);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_FALSE(d.is_image());
}

TEST_F(LoadersTest, CsvRegressionTargetsInRequestedOrder) {
  const auto path = Write("r.csv", "a,t1,b,t2\n1,10,2,20\n3,30,4,40\n");
  const Dataset d = LoadCsv(path, {{"t2", "t1"}, false});
  ASSERT_EQ(d.y.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(d.y.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(d.is_regression());
  EXPECT_TRUE(torch::equal(d.x, torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})));
  EXPECT_TRUE(
      torch::equal(d.y, torch::tensor({{20.0f, 10.0f}, {40.0f, 30.0f}})));
}

TEST_F(LoadersTest, CsvNonNumericCell) {
  const auto path = Write("t.csv", "a,b,y\n1,2,0\n3,abc,1\n");
  ExpectError(
      [&] {
        LoadCsv(path, {{"y"}, true});
      },
      {path, "line 3, column 2 (\"b\")", "expected a number", "\"abc\""});
  const auto empty_cell = Write("e.csv", "a,b,y\n1,,0\n");
  ExpectError(
      [&] {
        LoadCsv(empty_cell, {{"y"}, true});
      },
      {empty_cell, "line 2, column 2 (\"b\")", "empty cell"});
  const auto nan_cell = Write("n.csv", "a,b,y\n1,nan,0\n");
  ExpectError(
      [&] {
        LoadCsv(nan_cell, {{"y"}, true});
      },
      {nan_cell, "line 2, column 2", "\"nan\""});
  const auto fractional = Write("f.csv", "a,y\n1,0.5\n");
  ExpectError(
      [&] {
        LoadCsv(fractional, {{"y"}, true});
      },
      {fractional, "line 2, column 2 (\"y\")", "integer class label"});
}

TEST_F(LoadersTest, CsvWrongCellCount) {
  const auto path = Write("t.csv", "a,b,y\n1,2,0\n3,4,1\n5,6\n");
  ExpectError(
      [&] {
        LoadCsv(path, {{"y"}, true});
      },
      {path, "line 4", "expected 3 cells", "found 2"});
  const auto extra = Write("x.csv", "a,b,y\n1,2,0,9\n");
  ExpectError(
      [&] {
        LoadCsv(extra, {{"y"}, true});
      },
      {extra, "line 2", "found 4"});
}

TEST_F(LoadersTest, CsvUnknownTarget) {
  const auto path = Write("t.csv", "a,b,label\n1,2,0\n");
  ExpectError(
      [&] {
        LoadCsv(path, {{"target"}, true});
      },
      {path, "line 1", "unknown target column \"target\"", "a, b, label"});
  ExpectError([&] { LoadCsv(path, {{}, false}); }, {path, "no target column"});
}

TEST_F(LoadersTest, CsvEmpty) {
  const auto empty = Write("empty.csv", "");
  ExpectError(
      [&] {
        LoadCsv(empty, {{"y"}, true});
      },
      {empty, "line 1", "empty file", "header"});
  const auto blank = Write("blank.csv", "\n  \n");
  ExpectError(
      [&] {
        LoadCsv(blank, {{"y"}, true});
      },
      {blank, "line 2", "only blank lines"});
  const auto header_only = Write("h.csv", "a,y\n");
  ExpectError(
      [&] {
        LoadCsv(header_only, {{"y"}, true});
      },
      {header_only, "line 2", "no data rows"});
}

TEST(DatasetTest, SubsetSelectsRowsAndKeepsMetadata) {
  Dataset d;
  d.x = torch::arange(12, torch::kFloat32).reshape({6, 2});
  d.y = torch::tensor({0, 1, 2, 0, 1, 2}, torch::kInt64);
  d.num_classes = 3;
  d.name = "toy";
  const Dataset s = Subset(d, {4, 1, 4});
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.num_classes, 3);
  EXPECT_EQ(s.name, "toy");
  EXPECT_TRUE(torch::equal(
      s.x, torch::tensor({{8.0f, 9.0f}, {2.0f, 3.0f}, {8.0f, 9.0f}})));
  EXPECT_TRUE(torch::equal(s.y, torch::tensor({1, 1, 1}, torch::kInt64)));
  EXPECT_EQ(Subset(d, {}).size(), 0);
  ExpectError([&] { Subset(d, {0, 6}); }, {"toy", "index 6", "[0, 6)"});
}

TEST(FashionMnistTest, LoadsRealTestSet) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << dir << " not present";
  const Dataset d = LoadIdx(dir + "/t10k-images-idx3-ubyte.gz",
                            dir + "/t10k-labels-idx1-ubyte.gz", 10);
  ASSERT_EQ(d.x.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_GE(d.x.min().item<float>(), 0.0f);
  EXPECT_LE(d.x.max().item<float>(), 1.0f);
  EXPECT_GE(d.y.min().item<int64_t>(), 0);
  EXPECT_LE(d.y.max().item<int64_t>(), 9);
  const auto counts = torch::bincount(d.y, {}, 10);
  EXPECT_TRUE(torch::equal(counts, torch::full({10}, 1000, torch::kInt64)));
}

}  // namespace
}  // namespace fedprof
