// VectorDataset: the rows and labels as given, and the sizes checked.
#include "train/data/vector_dataset.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(VectorDatasetTest, RowsAndLabelsAsGiven) {
  absl::StatusOr<TensorDataset> data =
      VectorDataset({1, 2, 3, 4, 5, 6}, 3, {7, 0});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), 2);
  EXPECT_THAT(data->features.shape(), ElementsAre(2, 3));
  EXPECT_EQ(data->features.dtype(), DType::kF32);
  EXPECT_EQ(*data->features.ToVector<float>(),
            std::vector<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(data->labels.dtype(), DType::kI64);
  EXPECT_EQ(*data->labels.ToVector<int64_t>(), std::vector<int64_t>({7, 0}));
}

TEST(VectorDatasetTest, RefusesSizesThatDoNotFit) {
  absl::StatusOr<TensorDataset> short_rows =
      VectorDataset({1, 2, 3}, 2, {0, 1});
  EXPECT_EQ(short_rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_rows.status().message(),
              HasSubstr("expected 2 labels x row_size 2 feature values "
                        "(row_size >= 1), got 3"));
  EXPECT_EQ(VectorDataset({}, 0, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
