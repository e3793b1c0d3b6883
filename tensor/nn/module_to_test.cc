// Module::To(Device) on the test-only fake "CUDA" device
// (tensor/testing/fake_device.h: host memory behind a CUDA label), so the
// in-place move, the handles that follow it, shared allocations and the
// all-or-nothing error path are tested on machines without a GPU. The
// no-allocator error is in module_test.cc, which links no device at all.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/allocator.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/module.h"
#include "tensor/nn/test_util.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"

namespace tandem::nn {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// The elements of an f32 tensor on the CPU or on the fake device (whose
// memory is host memory).
std::vector<float> HostFloats(const Tensor& t) {
  const float* p = t.data<float>();
  return p == nullptr ? std::vector<float>()
                      : std::vector<float>(p, p + t.numel());
}

// A parameter "scale", an i64 buffer "steps" and a Linear child "fc":
// parameters scale, fc.weight, fc.bias; buffers steps.
class Net : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<Net>> Create(Generator& gen) {
    auto net = std::unique_ptr<Net>(new Net());
    TANDEM_ASSIGN_OR_RETURN(Tensor scale,
                            Tensor::FromVector<float>({1.5f, -2.f}));
    TANDEM_RETURN_IF_ERROR(net->RegisterParameter("scale", scale));
    TANDEM_ASSIGN_OR_RETURN(Tensor steps,
                            Tensor::FromVector<int64_t>({7, 9, 11}));
    TANDEM_RETURN_IF_ERROR(net->RegisterBuffer("steps", steps));
    TANDEM_ASSIGN_OR_RETURN(
        net->fc_, net->RegisterModule("fc", Linear::Create(3, 2, gen)));
    return net;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    return fc_->Forward(x);
  }
  std::string_view type_name() const override { return "Net"; }
  Linear* fc() const { return fc_; }

 private:
  Net() = default;
  Linear* fc_ = nullptr;
};

// Two parameters that are views of one flat allocation (offsets 0 and 4).
class Packed : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<Packed>> Create() {
    auto m = std::unique_ptr<Packed>(new Packed());
    TANDEM_ASSIGN_OR_RETURN(Tensor flat,
                            Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7}));
    TANDEM_ASSIGN_OR_RETURN(Tensor a, flat.View(0, {2, 2}));
    TANDEM_ASSIGN_OR_RETURN(Tensor b, flat.View(4, {3}));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("a", a));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("b", b));
    return m;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override { return x; }
  std::string_view type_name() const override { return "Packed"; }

 private:
  Packed() = default;
};

class ModuleToTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = &FakeDevice::Install();
    fake_->kernels->ClearCalls();
  }
  FakeDevice* fake_ = nullptr;
};

TEST_F(ModuleToTest, MovesParametersBuffersAndGradientsInPlace) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  const Tensor w = net->fc()->weight();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor g, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  TANDEM_NN_ASSERT_OK(w.set_grad(g));
  const Tensor grad = w.grad();  // a handle on the stored gradient

  // Handles taken before the move, and their values.
  const std::vector<Tensor> params = net->Parameters();
  const Tensor steps = net->Buffers()[0];
  std::vector<std::vector<float>> before;
  for (const Tensor& p : params) before.push_back(HostFloats(p));
  const void* cpu_weight = w.raw_data();
  // An optimizer made before the move holds the same handles.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(optim::Sgd sgd,
                                 optim::Sgd::Create(params, /*lr=*/0.1));

  TANDEM_NN_ASSERT_OK(net->To(Device::CUDA(0)));

  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].device(), Device::CUDA(0)) << i;
    EXPECT_EQ(net->Parameters()[i].device(), Device::CUDA(0)) << i;
    EXPECT_EQ(HostFloats(params[i]), before[i]) << i;
    EXPECT_TRUE(params[i].requires_grad()) << i;
    EXPECT_TRUE(params[i].is_leaf()) << i;
  }
  EXPECT_NE(w.raw_data(), cpu_weight);
  EXPECT_EQ(steps.device(), Device::CUDA(0));
  ASSERT_EQ(steps.dtype(), DType::kI64);
  EXPECT_THAT(
      std::vector<int64_t>(steps.data<int64_t>(), steps.data<int64_t>() + 3),
      ElementsAre(7, 9, 11));
  // The gradient moved with its parameter, and the old handle followed.
  ASSERT_TRUE(w.has_grad());
  EXPECT_EQ(w.grad().device(), Device::CUDA(0));
  EXPECT_EQ(grad.device(), Device::CUDA(0));
  EXPECT_EQ(grad.raw_data(), w.grad().raw_data());
  EXPECT_THAT(HostFloats(w.grad()), ElementsAre(1, 2, 3, 4, 5, 6));
  // The tensor handed to set_grad is another handle on the old memory.
  EXPECT_EQ(g.device(), Device::CPU());

  // The optimizer created before the move now steps on the device: only
  // fc.weight has a gradient.
  TANDEM_NN_ASSERT_OK(sgd.Step());
  EXPECT_THAT(fake_->kernels->calls(), ElementsAre("SgdStep"));

  // And back: same values, on the CPU again.
  TANDEM_NN_ASSERT_OK(net->To(Device::CPU()));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].device(), Device::CPU()) << i;
    absl::StatusOr<std::vector<float>> v = params[i].ToVector<float>();
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, before[i]) << i;
  }
  EXPECT_EQ(steps.device(), Device::CPU());
  EXPECT_EQ(grad.device(), Device::CPU());
  EXPECT_THAT(HostFloats(grad), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST_F(ModuleToTest, SharedAllocationsStayShared) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Packed> m, Packed::Create());
  const std::vector<Tensor> params = m->Parameters();
  TANDEM_NN_ASSERT_OK(m->To(Device::CUDA(1)));
  EXPECT_EQ(params[0].device(), Device::CUDA(1));
  EXPECT_EQ(params[1].device(), Device::CUDA(1));
  EXPECT_TRUE(params[0].SharesStorageWith(params[1]));
  EXPECT_EQ(params[0].storage_offset(), 0);
  EXPECT_EQ(params[1].storage_offset(), 4);
  EXPECT_EQ(params[0].storage()->nbytes(), 7 * 4);
  EXPECT_EQ(static_cast<const float*>(params[1].raw_data()),
            static_cast<const float*>(params[0].raw_data()) + 4);
  EXPECT_THAT(HostFloats(params[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(HostFloats(params[1]), ElementsAre(5, 6, 7));
}

TEST_F(ModuleToTest, TensorsAlreadyThereAreLeftAlone) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  const void* before = net->fc()->weight().raw_data();
  TANDEM_NN_ASSERT_OK(net->To(Device::CPU()));
  EXPECT_EQ(net->fc()->weight().raw_data(), before);
  TANDEM_NN_ASSERT_OK(net->To(Device::CUDA(0)));
  const void* on_device = net->fc()->weight().raw_data();
  TANDEM_NN_ASSERT_OK(net->To(Device::CUDA(0)));
  EXPECT_EQ(net->fc()->weight().raw_data(), on_device);
  EXPECT_TRUE(fake_->kernels->calls().empty());  // copies only, no kernels
}

// Host memory that refuses allocations after the first `budget`.
class BudgetAllocator : public Allocator {
 public:
  explicit BudgetAllocator(int budget) : budget_(budget) {}
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    if (budget_-- <= 0) {
      return absl::ResourceExhaustedError("out of memory on " +
                                          device.ToString());
    }
    return std::aligned_alloc(64, static_cast<size_t>((nbytes + 63) / 64 * 64));
  }
  void Deallocate(Device, void* ptr, int64_t) override { std::free(ptr); }
  absl::Status CopyBytes(void* dst, Device, const void* src, Device,
                         int64_t nbytes) override {
    std::memcpy(dst, src, static_cast<size_t>(nbytes));
    return absl::OkStatus();
  }

 private:
  int budget_;
};

TEST_F(ModuleToTest, AFailedMoveChangesNothing) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  std::vector<const void*> before;
  for (const Tensor& p : net->Parameters()) before.push_back(p.raw_data());

  absl::StatusOr<std::shared_ptr<Allocator>> fake_allocator =
      GetAllocator(Device::CUDA(0));
  ASSERT_TRUE(fake_allocator.ok()) << fake_allocator.status();
  // scale and fc.weight get memory; fc.bias does not.
  TANDEM_NN_ASSERT_OK(RegisterAllocator(DeviceType::kCUDA,
                                        std::make_shared<BudgetAllocator>(2)));
  const absl::Status s = net->To(Device::CUDA(0));
  TANDEM_NN_ASSERT_OK(RegisterAllocator(DeviceType::kCUDA, *fake_allocator));

  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("Net.To(cuda:0): moving parameter "
                                     "\"fc.bias\" ([2] f32 on cpu)"));
  EXPECT_THAT(s.message(), HasSubstr("out of memory on cuda:0"));
  EXPECT_THAT(s.message(), HasSubstr("Nothing was moved"));
  std::vector<const void*> after;
  for (const Tensor& p : net->Parameters()) {
    EXPECT_EQ(p.device(), Device::CPU());
    after.push_back(p.raw_data());
  }
  EXPECT_THAT(after, ElementsAreArray(before));
  EXPECT_EQ(net->Buffers()[0].device(), Device::CPU());
}

}  // namespace
}  // namespace tandem::nn
