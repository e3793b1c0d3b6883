// What LoadCsvDataset and ParseNpy check when they read (issue 18 §2): each
// value after its conversion to the tensor's dtype, labels against the class
// count, and the files that are not what the caller thinks they are (a BOM, a
// .npy passed as CSV or the reverse, another separator).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/csv_dataset.h"
#include "train/data/npy.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& contents) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(CsvChecksTest, F32OverflowNamesLineColumnAndValue) {
  std::string path = WriteFile("big.csv", "1,2,0\n3,1e40,1\n");
  auto f32 = LoadCsvDataset(path);
  ASSERT_FALSE(f32.ok());
  EXPECT_THAT(f32.status().message(),
              HasSubstr("big.csv:2: column 2: '1e40' overflows f32"));
  // The same value is finite as f64.
  auto f64 = LoadCsvDataset(path, {.feature_dtype = DType::kF64});
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_THAT(*f64->features.ToVector<double>(), ElementsAre(1, 2, 3, 1e40));
  // The largest finite f32 itself is accepted.
  auto edge = LoadCsvDataset(WriteFile("edge.csv", "3.4028234e38,0\n"));
  ASSERT_TRUE(edge.ok()) << edge.status();
  auto nan = LoadCsvDataset(WriteFile("nan.csv", "nan,0\n"));
  EXPECT_THAT(nan.status().message(), HasSubstr("'nan' is not a finite"));
}

TEST(CsvChecksTest, LabelsOutsideTheClassRangeFailAtLoad) {
  auto ten =
      LoadCsvDataset(WriteFile("ten.csv", "1,9\n2,10\n"), {.num_classes = 10});
  ASSERT_FALSE(ten.ok());
  EXPECT_THAT(ten.status().message(),
              HasSubstr("ten.csv:2: column 2 (the label): '10' is out of "
                        "range; labels must be class indices in [0, 10)"));
  // Without num_classes any non-negative label loads.
  EXPECT_TRUE(LoadCsvDataset(WriteFile("any.csv", "1,10\n")).ok());
  // Quoted as written, even past int64.
  auto max = LoadCsvDataset(WriteFile("max.csv", "1,9223372036854775807\n"),
                            {.num_classes = 10});
  EXPECT_THAT(max.status().message(),
              HasSubstr("'9223372036854775807' is out of range"));
  auto huge = LoadCsvDataset(WriteFile("huge.csv", "1,99999999999999999999\n"));
  EXPECT_THAT(huge.status().message(),
              HasSubstr("'99999999999999999999' is out of range (too large"));
  auto negative = LoadCsvDataset(WriteFile("neg.csv", "1,-1\n"));
  EXPECT_THAT(negative.status().message(), HasSubstr("'-1' is out of range"));
  // Integral floats are class indices.
  auto integral = LoadCsvDataset(WriteFile("int.csv", "1,3.0\n"));
  ASSERT_TRUE(integral.ok()) << integral.status();
  EXPECT_THAT(*integral->labels.ToVector<int64_t>(), ElementsAre(3));
  EXPECT_FALSE(
      LoadCsvDataset(WriteFile("nc.csv", "1,0\n"), {.num_classes = -1}).ok());
}

TEST(CsvChecksTest, AcceptsAUtf8ByteOrderMark) {
  auto data = LoadCsvDataset(WriteFile("bom.csv",
                                       "\xEF\xBB\xBF"
                                       "1,2,0\n3,4,1\n"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(*data->features.ToVector<float>(), ElementsAre(1, 2, 3, 4));
  auto header = LoadCsvDataset(WriteFile("bomh.csv",
                                         "\xEF\xBB\xBF"
                                         "a,label\n5,1\n"),
                               {.skip_header = true});
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_THAT(*header->labels.ToVector<int64_t>(), ElementsAre(1));
}

TEST(CsvChecksTest, NpyPassedAsCsvAndCsvPassedAsNpy) {
  auto tensor = *Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  const std::string npy = WriteFile("x.npy", "");
  ASSERT_TRUE(SaveNpy(npy, tensor).ok());
  auto as_csv = LoadCsvDataset(npy);
  EXPECT_THAT(as_csv.status().message(),
              HasSubstr("x.npy: this looks like a .npy file"));
  EXPECT_THAT(as_csv.status().message(), HasSubstr("load it with LoadNpy"));
  auto as_npy = LoadNpy(WriteFile("y.csv", "1,2,0\n"));
  EXPECT_THAT(as_npy.status().message(),
              HasSubstr("this looks like a text (CSV) file, not .npy; load it "
                        "with LoadCsvDataset"));
  auto gz = ParseNpy(
      std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10), "z.npy");
  EXPECT_THAT(gz.status().message(), HasSubstr("this is a gzip file"));
}

TEST(CsvChecksTest, AnotherSeparatorIsNamed) {
  auto semicolon = LoadCsvDataset(WriteFile("semi.csv", "1;2;0\n3;4;1\n"));
  EXPECT_THAT(semicolon.status().message(),
              HasSubstr("semi.csv:1: the values are separated by ';', but the "
                        "delimiter is ','"));
  auto tab = LoadCsvDataset(WriteFile("tab.csv", "1\t2\t0\n"));
  EXPECT_THAT(tab.status().message(), HasSubstr("separated by a tab"));
  // Mixed: a later row with ';' inside a field.
  auto mixed = LoadCsvDataset(WriteFile("mixed.csv", "1,2,0\n3;4,5,1\n"));
  EXPECT_THAT(mixed.status().message(),
              HasSubstr("mixed.csv:2: the values are separated by ';'"));
  // The right delimiter loads the same file.
  auto ok =
      LoadCsvDataset(WriteFile("semi2.csv", "1;2;0\n"), {.delimiter = ';'});
  ASSERT_TRUE(ok.ok()) << ok.status();
}

TEST(CsvChecksTest, TruncatedGzipIsAnErrorNotAShorterDataSet) {
  std::ifstream in("train/data/digits.csv.gz", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  ASSERT_GT(bytes.size(), 4000u);
  auto cut = LoadCsvDataset(WriteFile("cut.csv.gz", bytes.substr(0, 4000)));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(),
              HasSubstr("cut.csv.gz: the gzip stream ends early"));
}

// Data that came through LoadNpy or memory is checked with Validate.
TEST(DatasetValidateTest, NamesTheSampleValueAndRange) {
  auto x = *Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  auto y = *Tensor::FromVector<int64_t>({0, 1});
  auto good = *TensorDataset::Create(x, y);
  EXPECT_TRUE(good.Validate(2, "x.npy").ok());
  EXPECT_THAT(good.Validate(1, "x.npy").message(),
              HasSubstr("x.npy: sample 1 has label 1; labels must be class "
                        "indices in [0, 1)"));
  EXPECT_FALSE(good.Validate(0, "x.npy").ok());
  auto inf = *Tensor::FromVector<float>({1, 2, 3, HUGE_VALF}, {2, 2});
  auto bad = *TensorDataset::Create(inf, y);
  EXPECT_THAT(bad.Validate(2, "x.npy").message(),
              HasSubstr("x.npy: sample 1, feature 1 is inf"));
  auto nan = *Tensor::FromVector<double>({std::nan(""), 2}, {2, 1});
  EXPECT_THAT(TensorDataset::Create(nan, y)->Validate(2, "n").message(),
              HasSubstr("n: sample 0, feature 0 is nan"));
}

}  // namespace
}  // namespace tandem::train
