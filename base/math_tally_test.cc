#include "base/math_tally.h"

#include <thread>

#include "gtest/gtest.h"

namespace tandem::base {
namespace {

// Burns about `seconds` of this thread's CPU time.
void Spin(double seconds) {
  const double end = ThreadCpuSeconds() + seconds;
  volatile double x = 0;
  while (ThreadCpuSeconds() < end) x = x + 1;
}

TEST(MathTallyTest, CountsOnlyWhileOnAndOnlyInsideKernels) {
  const double before = ThisThreadMathSeconds();
  {
    ScopedMathKernel k;  // off: not counted
    Spin(0.01);
  }
  EXPECT_EQ(ThisThreadMathSeconds(), before);
  MathTallyScope on;
  EXPECT_TRUE(MathTallyOn());
  Spin(0.01);  // outside a kernel: not counted
  EXPECT_EQ(ThisThreadMathSeconds(), before);
  {
    ScopedMathKernel k;
    Spin(0.02);
  }
  const double counted = ThisThreadMathSeconds() - before;
  // CPU time, not wall time: at least what was spun, and not the 10 ms
  // spun outside (a generous bound for clock granularity).
  EXPECT_GE(counted, 0.02);
  EXPECT_LT(counted, 0.029);
}

TEST(MathTallyTest, NestedKernelsCountOnce) {
  MathTallyScope on;
  const double before = ThisThreadMathSeconds();
  {
    ScopedMathKernel outer;
    Spin(0.01);
    {
      ScopedMathKernel inner;
      Spin(0.01);
    }
  }
  const double counted = ThisThreadMathSeconds() - before;
  EXPECT_GE(counted, 0.02);
  EXPECT_LT(counted, 0.029);  // double counting would give >= 0.03
}

TEST(MathTallyTest, TheTallyIsPerThreadAndScopesNest) {
  {
    MathTallyScope a;
    {
      MathTallyScope b;
      EXPECT_TRUE(MathTallyOn());
    }
    EXPECT_TRUE(MathTallyOn());
    double other = -1;
    std::thread t([&] {
      {
        ScopedMathKernel k;
        Spin(0.005);
      }
      other = ThisThreadMathSeconds();
    });
    const double mine = ThisThreadMathSeconds();
    t.join();
    EXPECT_GE(other, 0.005);
    EXPECT_EQ(ThisThreadMathSeconds(), mine);  // the other thread's time
  }
  EXPECT_FALSE(MathTallyOn());
}

}  // namespace
}  // namespace tandem::base
