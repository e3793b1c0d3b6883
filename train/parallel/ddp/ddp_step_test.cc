#include "train/parallel/ddp/ddp_step.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;
using S = DdpStepState;
using C = DdpStepCall;

constexpr S kStates[] = {S::kIdle, S::kArmedLocal, S::kArmedSync, S::kReducing};
constexpr C kCalls[] = {C::kForwardSync, C::kForwardLocal, C::kForwardNoGrad,
                        C::kGradReady,   C::kBackward,     C::kFinish,
                        C::kReset};

// The whole table of ddp_step.h, written out: kStates x kCalls, an error
// status meaning "not allowed".
struct Row {
  S from;
  std::vector<std::pair<C, absl::StatusOr<S>>> to;
};

absl::StatusOr<S> Err() { return absl::FailedPreconditionError(""); }

TEST(DdpStepTest, EveryStateAndCallFollowsTheTable) {
  const std::vector<Row> table = {
      {S::kIdle,
       {{C::kForwardSync, S::kArmedSync},
        {C::kForwardLocal, S::kArmedLocal},
        {C::kForwardNoGrad, S::kIdle},
        {C::kGradReady, S::kIdle},
        {C::kBackward, Err()},
        {C::kFinish, Err()},
        {C::kReset, S::kIdle}}},
      {S::kArmedLocal,
       {{C::kForwardSync, S::kArmedSync},
        {C::kForwardLocal, S::kArmedLocal},
        {C::kForwardNoGrad, S::kArmedLocal},
        {C::kGradReady, S::kArmedLocal},
        {C::kBackward, S::kArmedLocal},
        {C::kFinish, S::kIdle},
        {C::kReset, S::kIdle}}},
      {S::kArmedSync,
       {{C::kForwardSync, S::kArmedSync},
        {C::kForwardLocal, S::kArmedLocal},
        {C::kForwardNoGrad, S::kArmedSync},
        {C::kGradReady, S::kReducing},
        {C::kBackward, S::kArmedSync},
        {C::kFinish, S::kIdle},
        {C::kReset, S::kIdle}}},
      {S::kReducing,
       {{C::kForwardSync, Err()},
        {C::kForwardLocal, Err()},
        {C::kForwardNoGrad, Err()},
        {C::kGradReady, S::kReducing},
        {C::kBackward, S::kReducing},
        {C::kFinish, S::kIdle},
        {C::kReset, S::kIdle}}},
  };
  int checked = 0;
  for (const Row& row : table) {
    for (const auto& [call, want] : row.to) {
      absl::StatusOr<S> got = NextDdpStepState(row.from, call);
      const std::string where =
          DdpStepStateName(row.from) + " + " + DdpStepCallName(call);
      if (want.ok()) {
        ASSERT_TRUE(got.ok()) << where << ": " << got.status();
        EXPECT_EQ(*got, *want) << where << " -> " << DdpStepStateName(*got);
      } else {
        EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition)
            << where;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(std::size(kStates) * std::size(kCalls)));
}

TEST(DdpStepTest, ErrorsNameTheCallAndTheState) {
  absl::StatusOr<S> s = NextDdpStepState(S::kReducing, C::kForwardSync);
  EXPECT_EQ(s.status().message(),
            "Forward is not allowed in step state reducing");
  s = NextDdpStepState(S::kIdle, C::kBackward);
  EXPECT_EQ(s.status().message(), "Backward is not allowed in step state idle");
  s = NextDdpStepState(S::kIdle, C::kFinish);
  EXPECT_EQ(s.status().message(),
            "FinishGradientSync is not allowed in step state idle");
}

TEST(DdpStepTest, ValuesOutsideTheEnumsAreErrors) {
  absl::StatusOr<S> s = NextDdpStepState(static_cast<S>(9), C::kReset);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("step state state(9)"));
  s = NextDdpStepState(S::kIdle, static_cast<C>(-3));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("call(-3) is not allowed"));
}

TEST(DdpStepTest, NamesAreDistinct) {
  std::vector<std::string> names;
  for (S s : kStates) names.push_back(DdpStepStateName(s));
  for (C c : kCalls) names.push_back(DdpStepCallName(c));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

}  // namespace
}  // namespace tandem::train
