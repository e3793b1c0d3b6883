// (c) The data flows: a linear classifier trains on the digits rendered as
// an image folder (PNG and JPEG files decoded by the DataLoader's workers,
// random crops and flips drawn from the rank's generator, a shuffled
// DistributedSampler), and its loss falls. Same seed, same losses.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/data/image_folder.h"
#include "train/data/image_testing.h"

namespace tandem::train {
namespace {

// Mean training loss of each of `epochs` epochs.
std::vector<double> Train(const std::shared_ptr<const ImageFolderDataset>& data,
                          int epochs) {
  std::vector<double> losses;
  Generator init(0);
  auto model = nn::Linear::Create(3 * 32 * 32, 10, init);
  EXPECT_TRUE(model.ok());
  auto sgd = optim::Sgd::Create((*model)->Parameters(), /*lr=*/0.01,
                                {.momentum = 0.9});
  EXPECT_TRUE(sgd.ok());
  auto sampler = DistributedSampler::Create(data->size(), {.seed = 3});
  EXPECT_TRUE(sampler.ok());
  Generator rank_gen(7);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    sampler->SetEpoch(epoch);
    auto loader =
        DataLoader::Create(data, sampler->Indices(), 25,
                           /*drop_last=*/true, rank_gen, {.num_workers = 2});
    EXPECT_TRUE(loader.ok()) << loader.status();
    double sum = 0;
    for (int64_t b = 0; b < loader->num_batches(); ++b) {
      absl::StatusOr<Batch> batch = loader->GetBatch(b);
      EXPECT_TRUE(batch.ok()) << batch.status();
      if (!batch.ok()) return losses;
      sgd->ZeroGrad();
      absl::StatusOr<Tensor> x = Flatten(batch->features, 1);
      absl::StatusOr<Tensor> logits = (*model)->Forward(*x);
      absl::StatusOr<Tensor> loss = CrossEntropy(*logits, batch->labels);
      EXPECT_TRUE(loss.ok()) << loss.status();
      EXPECT_TRUE(loss->Backward().ok());
      EXPECT_TRUE(sgd->Step().ok());
      sum += *loss->Item();
    }
    losses.push_back(sum / loader->num_batches());
  }
  return losses;
}

TEST(ImageFolderTrainTest, LossFallsOnTheDigitsFolder) {
  const std::string root =
      std::string(std::getenv("TEST_TMPDIR")) + "/digits_train";
  std::filesystem::remove_all(root);
  ASSERT_TRUE(
      testing::WriteDigitsFolder(root, "train/data/digits.csv.gz", 20).ok());
  auto data = ImageFolderDataset::Create(
      root, {.transform = {.random_crop = 32,
                           .random_crop_padding = 2,
                           .random_horizontal_flip = true,
                           .mean = {0.5f, 0.5f, 0.5f},
                           .std = {0.5f, 0.5f, 0.5f}}});
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ((*data)->size(), 200);
  const std::vector<double> losses = Train(*data, 6);
  ASSERT_EQ(losses.size(), 6u);
  for (size_t e = 0; e < losses.size(); ++e) {
    std::printf("epoch %zu: mean loss %.4f\n", e, losses[e]);
  }
  // Ten classes start near ln(10) = 2.30; the tinted digits separate well.
  EXPECT_GT(losses[0], 1.0);
  EXPECT_LT(losses.back(), 0.5 * losses[0]);
  EXPECT_EQ(Train(*data, 2),
            std::vector<double>(losses.begin(), losses.begin() + 2));
}

}  // namespace
}  // namespace tandem::train
