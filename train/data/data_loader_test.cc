#include "train/data/data_loader.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/dataset.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Five 2-feature samples whose features encode their index: sample i is
// (10 i, 10 i + 1) with label i % 2.
TensorDataset FiveSamples() {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int i = 0; i < 5; ++i) {
    x.push_back(10.f * i);
    x.push_back(10.f * i + 1);
    y.push_back(i % 2);
  }
  auto data = TensorDataset::Create(*Tensor::FromVector<float>(x, {5, 2}),
                                    *Tensor::FromVector<int64_t>(y));
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

TEST(DataLoaderTest, BatchesFollowTheIndexOrder) {
  auto loader = DataLoader::Create(FiveSamples(), {4, 1, 3}, /*batch_size=*/2,
                                   /*drop_last=*/false);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_EQ(loader->num_batches(), 2);
  EXPECT_EQ(loader->num_samples(), 3);
  auto first = loader->GetBatch(0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->features.shape(), (Shape{2, 2}));
  EXPECT_THAT(*first->features.ToVector<float>(), ElementsAre(40, 41, 10, 11));
  EXPECT_THAT(*first->labels.ToVector<int64_t>(), ElementsAre(0, 1));
  auto last = loader->GetBatch(1);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->features.shape(), (Shape{1, 2}));
  EXPECT_THAT(*last->features.ToVector<float>(), ElementsAre(30, 31));
}

TEST(DataLoaderTest, DropLastDropsTheShortBatch) {
  auto loader = DataLoader::Sequential(FiveSamples(), 2, /*drop_last=*/true);
  ASSERT_TRUE(loader.ok());
  EXPECT_EQ(loader->num_batches(), 2);
  EXPECT_EQ(loader->num_samples(), 4);
  EXPECT_FALSE(loader->GetBatch(2).ok());
  auto exact = DataLoader::Sequential(FiveSamples(), 5, /*drop_last=*/true);
  EXPECT_EQ(exact->num_batches(), 1);
  auto too_big = DataLoader::Sequential(FiveSamples(), 6, /*drop_last=*/true);
  EXPECT_EQ(too_big->num_batches(), 0);
}

TEST(DataLoaderTest, BatchesAreCopiesNotViewsOfTheDataset) {
  TensorDataset data = FiveSamples();
  auto loader = DataLoader::Sequential(data, 5, false);
  auto batch = loader->GetBatch(0);
  ASSERT_TRUE(batch.ok());
  batch->features.data<float>()[0] = -7;
  EXPECT_EQ(data.features.data<float>()[0], 0);
}

TEST(DataLoaderTest, RejectsBadIndicesAndBatchSizes) {
  auto bad_index = DataLoader::Create(FiveSamples(), {0, 5}, 2, false);
  EXPECT_EQ(bad_index.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(bad_index.status().message(),
              HasSubstr("index 5 at position 1 is outside the data set of 5"));
  auto bad_batch = DataLoader::Sequential(FiveSamples(), 0, false);
  EXPECT_THAT(bad_batch.status().message(),
              HasSubstr("batch_size must be >= 1, got 0"));
}

TEST(TensorDatasetTest, RejectsMismatchedOrMistypedLabels) {
  auto x = *Tensor::Zeros({3, 2});
  auto float_labels = TensorDataset::Create(x, *Tensor::Zeros({3}));
  EXPECT_THAT(float_labels.status().message(),
              HasSubstr("labels must be a 1-d int64 tensor"));
  auto short_labels =
      TensorDataset::Create(x, *Tensor::Zeros({2}, DType::kI64));
  EXPECT_THAT(
      short_labels.status().message(),
      HasSubstr("features has 3 samples (shape [3, 2]) but labels has 2"));
}

}  // namespace
}  // namespace tandem::train
