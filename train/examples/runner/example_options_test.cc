// One option list gives the struct with its defaults, the flags and their
// reading, the rules with the shared message, and the agreed entries.
#include "train/examples/runner/example_options.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#define DEMO_OPTIONS(X)                                                    \
  X(int64_t, epochs, 3, Between(0, 10), kAgreed, "Training epochs.")       \
  X(int64_t, batch_size, 2, AtLeast(1), kAgreed, "Per-rank batch size.")   \
  X(double, lr, 0.5, FiniteAtLeast(0), kAgreed, "Learning rate.")          \
  X(double, beta1, 0.9, InHalfOpenRange(0, 1), kAgreed, "Adam's beta1.")   \
  X(double, fraction, 0.25, InOpenRange(0, 1), kAgreed, "Held-out share.") \
  X(double, rate, 0.5, AboveAtMost(0, 10), kAgreed, "Step size.")          \
  X(std::string, decay, "cosine", OneOf("cosine", "step", "constant"),     \
    kAgreed, "Schedule.")                                                  \
  X(uint64_t, seed, 7, Any(), kAgreed, "Seed.")                            \
  X(bool, sync_bn, false, Any(), kAgreed, "SyncBatchNorm.")                \
  X(int, precision, 2, Between(0, 17), kLocal, "Printed decimals.")        \
  X(std::string, out, "", Any(), kLocal, "Output file.")

namespace tandem::train {
namespace {
TANDEM_EXAMPLE_OPTIONS(DemoOptions, DEMO_OPTIONS);
}  // namespace
}  // namespace tandem::train

using tandem::train::DemoOptions;
TANDEM_EXAMPLE_FLAGS(DemoOptions, DEMO_OPTIONS)

namespace tandem::train {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Names(const std::vector<ConfigEntry>& entries) {
  std::vector<std::string> names;
  for (const ConfigEntry& e : entries) names.push_back(e.name + "=" + e.value);
  return names;
}

TEST(ExampleOptionsTest, TheStructHoldsTheDefaults) {
  const DemoOptions o;
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.lr, 0.5);
  EXPECT_EQ(o.decay, "cosine");
  EXPECT_EQ(o.seed, 7u);
  EXPECT_FALSE(o.sync_bn);
  EXPECT_EQ(o.precision, 2);
  EXPECT_TRUE(CheckFlagRules(o.RankFlags()).ok());
}

TEST(ExampleOptionsTest, FlagsAreDefinedWithTheSameDefaultsAndRead) {
  const absl::CommandLineFlag* epochs = absl::FindCommandLineFlag("epochs");
  ASSERT_NE(epochs, nullptr);
  EXPECT_EQ(epochs->DefaultValue(), "3");
  EXPECT_EQ(epochs->Help(), "Training epochs.");
  ASSERT_NE(absl::FindCommandLineFlag("decay"), nullptr);
  EXPECT_EQ(absl::FindCommandLineFlag("decay")->DefaultValue(), "cosine");

  absl::SetFlag(&FLAGS_epochs, 5);
  absl::SetFlag(&FLAGS_decay, std::string("step"));
  absl::SetFlag(&FLAGS_sync_bn, true);
  const DemoOptions o = *ExampleOptionsFromFlags();
  EXPECT_EQ(o.epochs, 5);
  EXPECT_EQ(o.decay, "step");
  EXPECT_TRUE(o.sync_bn);
  EXPECT_EQ(o.batch_size, 2);
  // A broken rule is refused when the flags are read.
  absl::SetFlag(&FLAGS_batch_size, 0);
  EXPECT_EQ(
      ExampleOptionsFromFlags().status(),
      absl::InvalidArgumentError("--batch_size=0 (expected batch_size >= 1)"));
  absl::SetFlag(&FLAGS_batch_size, 2);
  absl::SetFlag(&FLAGS_epochs, 3);
  absl::SetFlag(&FLAGS_decay, std::string("cosine"));
  absl::SetFlag(&FLAGS_sync_bn, false);
}

TEST(ExampleOptionsTest, EveryBrokenRuleIsNamedWithTheSharedMessage) {
  DemoOptions o;
  o.epochs = 11;
  o.batch_size = 0;
  o.lr = std::numeric_limits<double>::infinity();
  o.beta1 = 1;
  o.fraction = 0;
  o.rate = 10.5;
  o.decay = "exp";
  o.precision = -1;
  EXPECT_EQ(
      CheckFlagRules(o.RankFlags()),
      absl::InvalidArgumentError(
          "--epochs=11 (expected 0 <= epochs <= 10); --batch_size=0 "
          "(expected batch_size >= 1); --lr=inf (expected lr >= 0, "
          "finite); --beta1=1 (expected 0 <= beta1 < 1); --fraction=0 "
          "(expected 0 < fraction < 1); --rate=10.5 (expected 0 < rate <= 10); "
          "--decay=exp (expected cosine, "
          "step or constant); --precision=-1 (expected 0 <= precision "
          "<= 17)"));
  o = DemoOptions();
  o.lr = std::nan("");
  o.beta1 = -0.5;
  EXPECT_EQ(CheckFlagRules(o.RankFlags()),
            absl::InvalidArgumentError(
                "--lr=nan (expected lr >= 0, finite); --beta1=-0.5 (expected "
                "0 <= beta1 < 1)"));
}

TEST(ExampleOptionsTest, OnlyAgreedOptionsAreCompared) {
  DemoOptions o;
  o.sync_bn = true;
  EXPECT_THAT(Names(Entries(o.RankFlags())),
              ElementsAre("--epochs=3", "--batch_size=2", "--lr=0.5",
                          "--beta1=0.9", "--fraction=0.25", "--rate=0.5",
                          "--decay=cosine", "--seed=7", "--sync_bn=true"));
}

}  // namespace
}  // namespace tandem::train
