// DataLoader over a MapDataset: batches in the index order, one generator
// per sample seeded from the rank's generator (so the same seed gives the
// same batches whatever num_workers is), workers that really run at once,
// and errors that name the sample.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/data_loader.h"
#include "train/data/map_dataset.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sample i: features (i, a draw from its generator), label i % 3. Index
// `broken` fails; index `odd_shape` has three features.
class Numbers : public MapDataset {
 public:
  explicit Numbers(int64_t n, int64_t broken = -1, int64_t odd_shape = -1)
      : n_(n), broken_(broken), odd_shape_(odd_shape) {}
  int64_t size() const override { return n_; }
  absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const override {
    if (index == broken_) {
      return absl::DataLossError(absl::StrCat("number ", index, " is broken"));
    }
    std::vector<float> x = {static_cast<float>(index),
                            static_cast<float>(gen.Random() % 1000)};
    if (index == odd_shape_) x.push_back(0);
    return Sample{*Tensor::FromVector<float>(x), index % 3};
  }

 private:
  int64_t n_, broken_, odd_shape_;
};

std::vector<float> AllFeatures(const DataLoader& loader) {
  std::vector<float> out;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    absl::StatusOr<Batch> batch = loader.GetBatch(b);
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok()) return out;
    const std::vector<float> values = *batch->features.ToVector<float>();
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

TEST(MapLoaderTest, BatchesFollowTheIndicesWithLabels) {
  auto data = std::make_shared<Numbers>(10);
  Generator gen(5);
  auto loader = DataLoader::Create(data, {7, 2, 9, 4, 0}, 2,
                                   /*drop_last=*/false, gen);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_EQ(loader->num_batches(), 3);
  absl::StatusOr<Batch> first = loader->GetBatch(0);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->features.shape(), (Shape{2, 2}));
  EXPECT_EQ(first->features.ToVector<float>()->at(0), 7);
  EXPECT_EQ(first->features.ToVector<float>()->at(2), 2);
  EXPECT_THAT(*first->labels.ToVector<int64_t>(), ElementsAre(1, 2));
  absl::StatusOr<Batch> last = loader->GetBatch(2);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->features.shape(), (Shape{1, 2}));
}

// Sample k is made with Generator(k-th draw of the rank's generator): the
// same with 0 or 3 workers, on any call order, and the rank's generator
// moves on by one draw per sample (the next epoch differs).
TEST(MapLoaderTest, DrawsDependOnTheSeedNotOnWorkers) {
  auto data = std::make_shared<Numbers>(9);
  std::vector<int64_t> order = {8, 1, 3, 5, 0, 2, 7};
  Generator gen_a(11), gen_b(11);
  auto serial = DataLoader::Create(data, order, 3, false, gen_a);
  auto parallel =
      DataLoader::Create(data, order, 3, false, gen_b, {.num_workers = 3});
  ASSERT_TRUE(serial.ok() && parallel.ok());
  const std::vector<float> a = AllFeatures(*serial);
  EXPECT_EQ(a, AllFeatures(*parallel));
  EXPECT_EQ(a, AllFeatures(*serial));  // again: GetBatch is const
  Generator expected(11);
  for (size_t k = 0; k < order.size(); ++k) {
    Generator sample_gen(expected.Random());
    EXPECT_EQ(a[2 * k + 1], static_cast<float>(sample_gen.Random() % 1000));
  }
  EXPECT_EQ(gen_a.Random(), expected.Random());
  auto next_epoch = DataLoader::Create(data, order, 3, false, gen_a);
  EXPECT_NE(AllFeatures(*next_epoch), a);
}

// The first two Get calls of a batch wait for each other (bounded): they
// can only both return if two threads make samples at once.
class Rendezvous : public Numbers {
 public:
  Rendezvous() : Numbers(8) {}
  absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const override {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ <= 2) {
      cv_.notify_all();
      if (!cv_.wait_for(lock, std::chrono::seconds(60),
                        [&] { return arrived_ >= 2; })) {
        return absl::DeadlineExceededError("no second worker in 60 s");
      }
    }
    lock.unlock();
    return Numbers::Get(index, gen);
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int arrived_ = 0;
};

TEST(MapLoaderTest, WorkersMakeSamplesConcurrently) {
  auto data = std::make_shared<Rendezvous>();
  Generator gen(0);
  auto loader = DataLoader::Create(data, {0, 1, 2, 3, 4, 5, 6, 7}, 8, false,
                                   gen, {.num_workers = 2});
  ASSERT_TRUE(loader.ok());
  absl::StatusOr<Batch> batch = loader->GetBatch(0);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->features.shape(), (Shape{8, 2}));
}

TEST(MapLoaderTest, ABadSampleFailsItsBatchOnly) {
  auto data = std::make_shared<Numbers>(6, /*broken=*/4, /*odd_shape=*/1);
  Generator gen(0);
  auto loader = DataLoader::Create(data, {0, 1, 2, 3, 4, 5}, 2, false, gen,
                                   {.num_workers = 2});
  ASSERT_TRUE(loader.ok());
  absl::StatusOr<Batch> odd = loader->GetBatch(0);
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(),
              HasSubstr("sample 1 of the batch (sample 1) is [3] f32, the "
                        "batch's first (sample 0) [2] f32"));
  absl::StatusOr<Batch> broken = loader->GetBatch(2);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(broken.status().message(),
              HasSubstr("sample 0 of the batch (data set index 4): number 4 "
                        "is broken"));
  EXPECT_TRUE(loader->GetBatch(1).ok());
}

TEST(MapLoaderTest, RejectsBadArguments) {
  Generator gen(0);
  auto data = std::make_shared<Numbers>(3);
  EXPECT_THAT(
      DataLoader::Create(data, {0, 3}, 1, false, gen).status().message(),
      HasSubstr("index 3 at position 1 is outside the data set of 3"));
  EXPECT_THAT(DataLoader::Create(data, {0}, 1, false, gen, {.num_workers = -1})
                  .status()
                  .message(),
              HasSubstr("num_workers = -1"));
  EXPECT_THAT(
      DataLoader::Create(std::shared_ptr<const MapDataset>(), {}, 1, false, gen)
          .status()
          .message(),
      HasSubstr("null"));
}

}  // namespace
}  // namespace tandem::train
