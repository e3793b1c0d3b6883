// What a forward pass under bf16 autocast leaves alive for backward, counted
// exactly by the CPU allocator: the saved activations are the bf16 tensors
// (Linear's cast input, the bf16 Linear and ReLU outputs), never f32 copies,
// and only the tensors some backward reads (the graph's edges hold no
// memory); the parameter casts are counted apart (amp::CastCacheBytes). And
// the 16-bit ReLU that makes it so gives the f32 route's bits exactly,
// forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tensor/allocator.h"
#include "tensor/amp/autocast.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::amp {
namespace {

// The host allocator, counting the bytes it has handed out and not had back.
class CountingAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    absl::StatusOr<void*> p = host_->Allocate(device, nbytes);
    if (p.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      in_use_ += nbytes;
    }
    return p;
  }
  void Deallocate(Device device, void* ptr, int64_t nbytes) override {
    host_->Deallocate(device, ptr, nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= nbytes;
  }
  absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                         Device src_device, int64_t nbytes) override {
    return host_->CopyBytes(dst, dst_device, src, src_device, nbytes);
  }
  int64_t in_use() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
  }

 private:
  std::shared_ptr<Allocator> host_ = CpuAllocator();
  std::mutex mu_;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

// Installs a CountingAllocator for the CPU for the test's lifetime.
class ActivationMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(RegisterAllocator(DeviceType::kCPU, counter_).ok());
  }
  void TearDown() override {
    ASSERT_TRUE(RegisterAllocator(DeviceType::kCPU, CpuAllocator()).ok());
  }
  std::shared_ptr<CountingAllocator> counter_ =
      std::make_shared<CountingAllocator>();
};

// Deterministic values in [-1, 1) that are not bf16-exact.
Tensor RandomF32(Shape shape, int64_t seed, bool grad) {
  Tensor t = Tensor::Empty(shape).value();
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    p[i] = static_cast<float>((i * 37 + seed * 11) % 17 - 8) / 8.f + 0.013f;
  }
  if (grad) {
    EXPECT_TRUE(t.set_requires_grad(true).ok());
  }
  return t;
}

// x [4, 8] -> Linear(8, 16) -> ReLU -> Linear(16, 4).
constexpr int64_t kBatch = 4, kIn = 8, kHidden = 16, kOut = 4;

struct Mlp {
  Tensor x = RandomF32({kBatch, kIn}, 1, false);
  Tensor w1 = RandomF32({kHidden, kIn}, 2, true);
  Tensor b1 = RandomF32({kHidden}, 3, true);
  Tensor w2 = RandomF32({kOut, kHidden}, 4, true);
  Tensor b2 = RandomF32({kOut}, 5, true);

  absl::StatusOr<Tensor> Forward() const {
    absl::StatusOr<Tensor> h = Linear(x, w1, b1);
    if (h.ok()) h = Relu(*h);
    if (h.ok()) h = Linear(*h, w2, b2);
    return h;
  }
};

TEST_F(ActivationMemoryTest, AutocastKeepsOnlyBf16TensorsForBackward) {
  Mlp mlp;
  const int64_t before = counter_->in_use();
  Tensor y;
  {
    Autocast autocast(DeviceType::kCPU, DType::kBF16);
    ASSERT_TRUE(autocast.status().ok());
    absl::StatusOr<Tensor> out = mlp.Forward();
    ASSERT_TRUE(out.ok()) << out.status();
    y = *out;
    // Every parameter cast once, to bf16 (2 bytes an element).
    EXPECT_EQ(CastCacheBytes(),
              2 * (kHidden * kIn + kHidden + kOut * kHidden + kOut));
  }
  EXPECT_EQ(y.dtype(), DType::kBF16);
  EXPECT_EQ(CastCacheSize(), 0);
  // What stays alive after the region, element counts times 2 bytes (bf16):
  const int64_t saved_activations =
      kBatch * kIn         // x cast to bf16, saved by Linear 1 for dW1
      + kBatch * kHidden   // Linear 1's bf16 output, saved by ReLU
      + kBatch * kHidden;  // ReLU's bf16 output, saved by Linear 2 for dW2
  // Of the parameter casts only W2's stays: Linear 2 saves it for dx. W1's
  // (Linear 1 has no dx to compute) and the biases' (their gradient is a
  // column sum of the output's) went with the cast cache: the graph holds
  // its inputs as storage-less edges (TensorImpl::graph_edge).
  const int64_t parameter_casts = kOut * kHidden;
  const int64_t output = kBatch * kOut;
  EXPECT_EQ(counter_->in_use() - before,
            2 * (saved_activations + parameter_casts + output));

  // Backward runs through the same graph: f32 gradients on the f32 masters.
  absl::StatusOr<Tensor> loss = Sum(y);
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_TRUE(loss->Backward().ok());
  for (const Tensor* p : {&mlp.w1, &mlp.b1, &mlp.w2, &mlp.b2}) {
    ASSERT_TRUE(p->has_grad());
    EXPECT_EQ(p->grad().dtype(), DType::kF32);
  }
}

TEST_F(ActivationMemoryTest, F32KeepsTheF32Activations) {
  Mlp mlp;
  const int64_t before = counter_->in_use();
  absl::StatusOr<Tensor> y = mlp.Forward();
  ASSERT_TRUE(y.ok()) << y.status();
  // Linear 1's output (saved by ReLU), ReLU's output (saved by Linear 2),
  // the output; 4 bytes an element. The parameters are the leaves themselves.
  EXPECT_EQ(counter_->in_use() - before,
            4 * (kBatch * kHidden + kBatch * kHidden + kBatch * kOut));
}

TEST_F(ActivationMemoryTest, TensorsNoBackwardReadsAreFreed) {
  // AddScalar, MulScalar and Sum save no tensor for backward, so once the
  // handles y and z go, nothing keeps their memory: the nodes consuming
  // them hold storage-less edges.
  Tensor x = RandomF32({kBatch, kIn}, 6, true);
  const int64_t before = counter_->in_use();
  Tensor loss;
  {
    Tensor y = Add(x, 1.0).value();  // saves nothing
    Tensor z = Mul(y, 2.0).value();  // saves nothing
    loss = Sum(z).value();           // saves nothing but shapes
  }
  // Only the loss (one f32) is left: y and z are graph edges, not memory.
  EXPECT_EQ(counter_->in_use() - before, 4);
  ASSERT_TRUE(loss.Backward().ok());
  // d loss / dx = 2 everywhere, delivered through the edges.
  const std::vector<float> grad = x.grad().ToVector<float>().value();
  EXPECT_EQ(grad, std::vector<float>(kBatch * kIn, 2.f));
}

// Relu of a 16-bit tensor against the f32 route it replaced: widen, relu in
// f32, round back; gradients through the same casts. Bitwise, specials too.
void ExpectReluMatchesF32Route(DType dtype) {
  SCOPED_TRACE(DTypeName(dtype));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {-2.5f, -0.f, 0.f, 1e-40f, -1e-40f, 3.25f,
                                     inf,   -inf, nan, -nan,   0.1f,    -0.1f};
  const Tensor base =
      Tensor::FromVector<float>(values, {3, 4}).value().To(dtype).value();
  const std::vector<float> gvalues = {1.5f,  -2.f, 3.f, 0.25f, -1.f,  7.f,
                                      -0.5f, 2.f,  9.f, -3.f,  0.75f, 1.f};
  const Tensor g =
      Tensor::FromVector<float>(gvalues, {3, 4}).value().To(dtype).value();

  auto run = [&](bool native) {
    Tensor x = base.To(dtype).value();  // a fresh leaf
    EXPECT_TRUE(x.set_requires_grad(true).ok());
    absl::StatusOr<Tensor> y =
        native ? Relu(x) : Relu(x.To(DType::kF32).value()).value().To(dtype);
    EXPECT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->dtype(), dtype);
    EXPECT_TRUE(y->Backward(g).ok());
    // Raw 16-bit encodings of the output and of x's gradient.
    std::vector<uint16_t> bits(24);
    std::memcpy(bits.data(), y->raw_data(), 24);
    std::memcpy(bits.data() + 12, x.grad().raw_data(), 24);
    return bits;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST(NativeReluTest, Bf16MatchesTheF32RouteBitwise) {
  ExpectReluMatchesF32Route(DType::kBF16);
}

TEST(NativeReluTest, F16MatchesTheF32RouteBitwise) {
  ExpectReluMatchesF32Route(DType::kF16);
}

}  // namespace
}  // namespace tandem::amp
