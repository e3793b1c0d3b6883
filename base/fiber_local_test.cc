#include "base/fiber_local.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace tandem::base {
namespace {

thread_local int t_number = 7;
thread_local std::shared_ptr<std::string> t_text;

const bool kNumber =
    RegisterFiberLocal<int>([]() -> int& { return t_number; }, -1);
const bool kText = RegisterFiberLocal<std::shared_ptr<std::string>>(
    []() -> std::shared_ptr<std::string>& { return t_text; }, nullptr);

TEST(FiberLocalTest, RegistrationCounts) {
  EXPECT_TRUE(kNumber);
  EXPECT_TRUE(kText);
  EXPECT_GE(NumFiberLocals(), 2);
}

// A fiber starts with the registered initial values; switching in and out
// keeps each side's own values.
TEST(FiberLocalTest, SwapExchangesTheThreadsValuesWithTheFibers) {
  t_number = 7;
  t_text = std::make_shared<std::string>("thread");
  FiberLocals a;
  FiberLocals b;
  a.Swap();  // a in
  EXPECT_EQ(t_number, -1);
  EXPECT_EQ(t_text, nullptr);
  t_number = 1;
  t_text = std::make_shared<std::string>("a");
  a.Swap();  // a out
  EXPECT_EQ(t_number, 7);
  EXPECT_EQ(*t_text, "thread");
  b.Swap();  // b in
  EXPECT_EQ(t_number, -1);
  t_number = 2;
  b.Swap();  // b out
  a.Swap();  // a in again
  EXPECT_EQ(t_number, 1);
  EXPECT_EQ(*t_text, "a");
  a.Swap();
  EXPECT_EQ(t_number, 7);
  EXPECT_EQ(*t_text, "thread");
}

}  // namespace
}  // namespace tandem::base
