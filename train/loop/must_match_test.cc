#include "train/loop/must_match.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(MustMatchTest, TheRunsLengthCadenceAndPrintingMayChange) {
  EXPECT_THAT(MustMatchOnResume({{"--epochs", 3},
                                 {"--seed", 7},
                                 {"--lr", 0.1},
                                 {"--checkpoint_dir", "ck"},
                                 {"--checkpoint_every", 2},
                                 {"--max_steps", 10},
                                 {"--global_batch_size", 32},
                                 {"dataset hash", "0f18"},
                                 {"--log_ranks", "all"}}),
              ElementsAre(Pair("--seed", "7"), Pair("--lr", "0.1"),
                          Pair("--global_batch_size", "32"),
                          Pair("dataset hash", "0f18")));
}

}  // namespace
}  // namespace tandem::train
