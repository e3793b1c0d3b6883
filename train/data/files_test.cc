// CSV and NPY loading: real files, including numpy's own bytes and the
// digits data set shipped in train/data.
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/csv_dataset.h"
#include "train/data/npy.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(CsvDatasetTest, LoadsFeaturesAndLastColumnLabels) {
  std::string path = WriteFile("ok.csv", "1, 2.5,0\n-3,4e1,2\r\n\n5,6,1\n");
  auto data = LoadCsvDataset(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->features.shape(), (Shape{3, 2}));
  EXPECT_THAT(*data->features.ToVector<float>(),
              ElementsAre(1, 2.5, -3, 40, 5, 6));
  EXPECT_THAT(*data->labels.ToVector<int64_t>(), ElementsAre(0, 2, 1));
}

TEST(CsvDatasetTest, LabelColumnHeaderAndF64) {
  std::string path = WriteFile("hdr.csv", "label,a,b\n3,0.1,0.2\n");
  auto data = LoadCsvDataset(
      path,
      {.label_column = 0, .skip_header = true, .feature_dtype = DType::kF64});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(*data->features.ToVector<double>(), ElementsAre(0.1, 0.2));
  EXPECT_THAT(*data->labels.ToVector<int64_t>(), ElementsAre(3));
}

TEST(CsvDatasetTest, ErrorsNameFileLineAndColumn) {
  auto ragged = LoadCsvDataset(WriteFile("ragged.csv", "1,2,0\n3,1\n"));
  EXPECT_THAT(ragged.status().message(),
              HasSubstr("ragged.csv:2: 2 columns, but earlier rows have 3"));
  auto word = LoadCsvDataset(WriteFile("word.csv", "1,2,0\n3,x,1\n"));
  EXPECT_THAT(word.status().message(),
              HasSubstr("word.csv:2: column 2: 'x' is not a finite number"));
  auto label = LoadCsvDataset(WriteFile("label.csv", "1,2,0.5\n"));
  EXPECT_THAT(label.status().message(),
              HasSubstr("label.csv:1: column 3 (the label): '0.5' is not a "
                        "class index"));
  auto negative = LoadCsvDataset(WriteFile("neg.csv", "1,2,-1\n"));
  EXPECT_FALSE(negative.ok());
  auto empty = LoadCsvDataset(WriteFile("empty.csv", "\n\n"));
  EXPECT_THAT(empty.status().message(), HasSubstr("no data rows"));
  auto missing = LoadCsvDataset(TempPath("does_not_exist.csv"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(CsvDatasetTest, LoadsTheShippedDigitsDataSet) {
  auto digits = LoadCsvDataset("train/data/digits.csv.gz");
  ASSERT_TRUE(digits.ok()) << digits.status();
  EXPECT_EQ(digits->features.shape(), (Shape{1797, 64}));
  // First row of the file: 0,0,5,13,9,1,0,0,... label 0.
  const float* x = digits->features.data<float>();
  EXPECT_THAT(std::vector<float>(x, x + 6), ElementsAre(0, 0, 5, 13, 9, 1));
  auto labels = *digits->labels.ToVector<int64_t>();
  EXPECT_EQ(labels[0], 0);
  std::vector<int> per_class(10, 0);
  for (int64_t y : labels) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 10);
    ++per_class[y];
  }
  for (int c = 0; c < 10; ++c) EXPECT_GE(per_class[c], 170) << "class " << c;
}

// np.save(f, np.array([[1.5, -2.0, 3.25], [4, 5, 6]], dtype='<f4'))
std::string NumpyF32Bytes() {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(117 - header.size(), ' ');
  header.push_back('\n');
  std::string bytes = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header;
  const float values[] = {1.5f, -2.0f, 3.25f, 4, 5, 6};
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  return bytes;
}

TEST(NpyTest, ReadsNumpysBytes) {
  ASSERT_EQ(NumpyF32Bytes().size(), 152u);  // numpy's file is 152 bytes
  auto t = ParseNpy(NumpyF32Bytes(), "x.npy");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_THAT(*t->ToVector<float>(), ElementsAre(1.5, -2, 3.25, 4, 5, 6));
}

TEST(NpyTest, SaveIsByteIdenticalToNumpyAndRoundTrips) {
  auto t = *Tensor::FromVector<float>({1.5f, -2.0f, 3.25f, 4, 5, 6}, {2, 3});
  std::string path = TempPath("round.npy");
  ASSERT_TRUE(SaveNpy(path, t).ok());
  std::ifstream in(path, std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(written, NumpyF32Bytes());

  auto labels = *Tensor::FromVector<int64_t>({7, -8, 9});
  ASSERT_TRUE(SaveNpy(TempPath("labels.npy"), labels).ok());
  auto back = LoadNpy(TempPath("labels.npy"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (Shape{3}));
  EXPECT_THAT(*back->ToVector<int64_t>(), ElementsAre(7, -8, 9));
}

TEST(NpyTest, MalformedFilesNameTheProblemAndOffset) {
  std::string bytes = NumpyF32Bytes();
  auto truncated = ParseNpy(bytes.substr(0, bytes.size() - 4), "t.npy");
  EXPECT_THAT(
      truncated.status().message(),
      HasSubstr("t.npy: not a readable .npy file at byte 128: shape "
                "[2, 3] of f32 needs 24 bytes of data, the file has 20"));
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_THAT(ParseNpy(fortran, "f.npy").status().message(),
              HasSubstr("fortran_order is True"));
  std::string big_endian = bytes;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  EXPECT_THAT(ParseNpy(big_endian, "b.npy").status().message(),
              HasSubstr("element type '>f4' is not supported"));
  EXPECT_THAT(
      ParseNpy(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b", 11),
               "h.npy")
          .status()
          .message(),
      HasSubstr("h.npy: not a readable .npy file at byte 0: missing"));
  EXPECT_EQ(LoadNpy(TempPath("nope.npy")).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::train
