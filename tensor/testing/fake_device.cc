#include "tensor/testing/fake_device.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensor/allocator.h"
#include "tensor/convert.h"

namespace tandem {
namespace {

class HostBackedAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device, int64_t nbytes) override {
    if (nbytes == 0) return nullptr;
    return std::aligned_alloc(64, static_cast<size_t>((nbytes + 63) / 64 * 64));
  }
  void Deallocate(Device, void* ptr, int64_t) override { std::free(ptr); }
  absl::Status CopyBytes(void* dst, Device, const void* src, Device,
                         int64_t nbytes) override {
    if (nbytes > 0) std::memcpy(dst, src, static_cast<size_t>(nbytes));
    return absl::OkStatus();
  }
};

FakeKernels& Record() {
  static FakeKernels* kernels = new FakeKernels;  // leaked: see the header
  return *kernels;
}

absl::Status Fake(const char* name) {
  Record().Record(name);
  return absl::UnimplementedError(absl::StrCat("fake device: ", name));
}

absl::Status FakeMatMul(const Tensor&, const Tensor&, bool, bool,
                        const GradOut&) {
  return Fake("MatMul");
}
absl::Status FakeLinear(const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&) {
  return Fake("Linear");
}
absl::Status FakeBinary(BinaryOp, const Tensor&, const Tensor&,
                        const internal::BroadcastPlan&, const Tensor&) {
  return Fake("Binary");
}
absl::Status FakeUnary(UnaryOp, const Tensor&, double, const Tensor&) {
  return Fake("Unary");
}
absl::Status FakeSoftmax(const Tensor&, int64_t, bool, const Tensor&) {
  return Fake("Softmax");
}
absl::Status FakeSumAll(const Tensor&, bool, const Tensor&) {
  return Fake("SumAll");
}
absl::Status FakeSumDim(const Tensor&, int64_t, bool, const Tensor&) {
  return Fake("SumDim");
}
absl::Status FakeArgmax(const Tensor&, int64_t, const Tensor&) {
  return Fake("Argmax");
}
absl::Status FakeConv2d(const Tensor&, const Tensor&, const Tensor&,
                        const Conv2dOptions&, const Tensor&) {
  return Fake("Conv2d");
}
absl::Status FakePool2d(const Tensor&, const Tensor&, const Tensor&,
                        const Pool2dArgs&) {
  return Fake("Pool2d");
}
absl::Status FakeCrossEntropy(const Tensor&, const Tensor&,
                              const CrossEntropyOptions&, const Tensor&,
                              const Tensor&, int64_t*) {
  return Fake("CrossEntropy");
}
absl::Status FakeMse(const Tensor&, const Tensor&, const Tensor&) {
  return Fake("Mse");
}
absl::Status FakeAddInPlace(const Tensor&, const Tensor&, double) {
  Record().Record("AddInPlace");
  return absl::OkStatus();
}
absl::Status FakeScaleInPlace(const Tensor&, double) {
  Record().Record("ScaleInPlace");
  return absl::OkStatus();
}
absl::Status FakeFillInPlace(const Tensor& dst, double value) {
  Record().Record("FillInPlace");
  internal::FillElements(dst.raw_data(), dst.dtype(), dst.numel(), value);
  return absl::OkStatus();
}
absl::Status FakeConvert(const Tensor& src, const Tensor& dst) {
  Record().Record("Convert");
  internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                            dst.dtype(), src.numel());
  return absl::OkStatus();
}
absl::Status FakeSgdStep(const Tensor&, const Tensor&, const Tensor&,
                         const SgdStepArgs& args) {
  Record().RecordSgd(args);
  return absl::OkStatus();
}
absl::Status FakeAdamWStep(const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&,
                           const AdamWStepArgs& args) {
  Record().RecordAdamW(args);
  return absl::OkStatus();
}

absl::Status RegisterFakes() {
  constexpr DeviceType kType = DeviceType::kCUDA;
  for (absl::Status s : {
           MatMulKernels().Register(kType, FakeMatMul),
           LinearKernels().Register(kType, FakeLinear),
           BinaryKernels().Register(kType, FakeBinary),
           UnaryKernels().Register(kType, FakeUnary),
           SoftmaxKernels().Register(kType, FakeSoftmax),
           SumAllKernels().Register(kType, FakeSumAll),
           SumDimKernels().Register(kType, FakeSumDim),
           ArgmaxKernels().Register(kType, FakeArgmax),
           Conv2dKernels().Register(kType, FakeConv2d),
           Pool2dKernels().Register(kType, FakePool2d),
           CrossEntropyKernels().Register(kType, FakeCrossEntropy),
           MseKernels().Register(kType, FakeMse),
           AddInPlaceKernels().Register(kType, FakeAddInPlace),
           ScaleInPlaceKernels().Register(kType, FakeScaleInPlace),
           FillInPlaceKernels().Register(kType, FakeFillInPlace),
           ConvertKernels().Register(kType, FakeConvert),
           SgdStepKernels().Register(kType, FakeSgdStep),
           AdamWStepKernels().Register(kType, FakeAdamWStep),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> FakeKernels::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}
void FakeKernels::ClearCalls() {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.clear();
}
SgdStepArgs FakeKernels::last_sgd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_sgd_;
}
AdamWStepArgs FakeKernels::last_adamw() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_adamw_;
}
void FakeKernels::Record(const char* op) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back(op);
}
void FakeKernels::RecordSgd(const SgdStepArgs& args) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back("SgdStep");
  last_sgd_ = args;
}
void FakeKernels::RecordAdamW(const AdamWStepArgs& args) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.push_back("AdamWStep");
  last_adamw_ = args;
}

FakeDevice& FakeDevice::Install() {
  static FakeDevice* fake = [] {
    auto* f = new FakeDevice;
    f->before_install = MatMulKernels().For(Device::CUDA(0)).status();
    f->kernels = &Record();
    RegisterAllocator(DeviceType::kCUDA,
                      std::make_shared<HostBackedAllocator>())
        .IgnoreError();
    // Cannot fail: every row above has the signature it is registered with.
    RegisterFakes().IgnoreError();
    return f;
  }();
  return *fake;
}

}  // namespace tandem
