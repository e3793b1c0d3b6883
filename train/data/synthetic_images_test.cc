// The image recipe the fidelity peer (bench/peers/resnet_ddp.py) repeats:
// torch.manual_seed(seed + 1 + k); torch.randn(3, S, S); one row + 2.
#include "train/data/synthetic_images.h"

#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"

namespace tandem::train {
namespace {

TEST(SyntheticImagesTest, FollowTheRecipe) {
  SyntheticImages images(4, 8, 5, 4, 7);  // images 8..11 of the run
  Generator unused(0);
  absl::StatusOr<Sample> s = images.Get(1, unused);  // k = 9, label 4
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->label, 4);
  std::vector<float> expected(48);
  Generator gen(7 + 1 + 9);
  gen.Normal(expected.data(), 48, 0.f, 1.f);
  for (int j = 0; j < 4; ++j) expected[(1 * 4 + 0) * 4 + j] += 2.f;  // c 1
  const float* got = s->features.data<float>();
  for (int i = 0; i < 48; ++i) EXPECT_EQ(got[i], expected[i]) << i;
  EXPECT_EQ(images.Describe(1), "synthetic image 9 (seed 17)");
}

TEST(SyntheticImagesTest, RefusesAnIndexOutside) {
  SyntheticImages images(4, 0, 2, 4, 0);
  Generator unused(0);
  EXPECT_EQ(images.Get(4, unused).status(),
            absl::OutOfRangeError("synthetic image 4 of 4 (0..3)"));
  EXPECT_EQ(images.Get(-1, unused).status().code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace tandem::train
