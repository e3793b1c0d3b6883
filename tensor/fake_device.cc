#include "tensor/fake_device.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

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

absl::Status Fake(const char* name) {
  return absl::UnimplementedError(absl::StrCat("fake device: ", name));
}

}  // namespace

#define TANDEM_FAKE_OP(name) \
  calls.push_back(#name);    \
  return Fake(#name)

absl::StatusOr<Tensor> FakeDeviceOps::MatMul(const Tensor&, const Tensor&, bool,
                                             bool) {
  TANDEM_FAKE_OP(MatMul);
}
absl::StatusOr<Tensor> FakeDeviceOps::Linear(const Tensor&, const Tensor&,
                                             const Tensor&) {
  TANDEM_FAKE_OP(Linear);
}
absl::StatusOr<Tensor> FakeDeviceOps::Binary(BinaryOp, const Tensor&,
                                             const Tensor&) {
  TANDEM_FAKE_OP(Binary);
}
absl::StatusOr<Tensor> FakeDeviceOps::Unary(UnaryOp, const Tensor&, double) {
  TANDEM_FAKE_OP(Unary);
}
absl::StatusOr<Tensor> FakeDeviceOps::Softmax(const Tensor&, int64_t, bool) {
  TANDEM_FAKE_OP(Softmax);
}
absl::StatusOr<Tensor> FakeDeviceOps::SumAll(const Tensor&, bool) {
  TANDEM_FAKE_OP(SumAll);
}
absl::StatusOr<Tensor> FakeDeviceOps::SumDim(const Tensor&, int64_t, bool,
                                             bool) {
  TANDEM_FAKE_OP(SumDim);
}
absl::StatusOr<Tensor> FakeDeviceOps::Argmax(const Tensor&, int64_t) {
  TANDEM_FAKE_OP(Argmax);
}
absl::StatusOr<Tensor> FakeDeviceOps::Conv2d(const Tensor&, const Tensor&,
                                             const Tensor&,
                                             const Conv2dOptions&) {
  TANDEM_FAKE_OP(Conv2d);
}
absl::StatusOr<Tensor> FakeDeviceOps::MaxPool2d(const Tensor&,
                                                const MaxPool2dOptions&) {
  TANDEM_FAKE_OP(MaxPool2d);
}
absl::StatusOr<Tensor> FakeDeviceOps::CrossEntropy(const Tensor&,
                                                   const Tensor&) {
  TANDEM_FAKE_OP(CrossEntropy);
}
absl::StatusOr<Tensor> FakeDeviceOps::Mse(const Tensor&, const Tensor&) {
  TANDEM_FAKE_OP(Mse);
}

#undef TANDEM_FAKE_OP

absl::Status FakeDeviceOps::AddInPlace(const Tensor&, const Tensor&, double) {
  calls.push_back("AddInPlace");
  return absl::OkStatus();
}
absl::Status FakeDeviceOps::ScaleInPlace(const Tensor&, double) {
  calls.push_back("ScaleInPlace");
  return absl::OkStatus();
}
absl::Status FakeDeviceOps::FillInPlace(const Tensor& dst, double value) {
  calls.push_back("FillInPlace");
  internal::FillElements(dst.raw_data(), dst.dtype(), dst.numel(), value);
  return absl::OkStatus();
}
absl::Status FakeDeviceOps::Convert(const Tensor& src, const Tensor& dst) {
  calls.push_back("Convert");
  internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                            dst.dtype(), src.numel());
  return absl::OkStatus();
}
absl::Status FakeDeviceOps::SgdStep(const Tensor&, const Tensor&, const Tensor&,
                                    const SgdStepArgs& args) {
  calls.push_back("SgdStep");
  last_sgd = args;
  return absl::OkStatus();
}
absl::Status FakeDeviceOps::AdamWStep(const Tensor&, const Tensor&,
                                      const Tensor&, const Tensor&,
                                      const Tensor&,
                                      const AdamWStepArgs& args) {
  calls.push_back("AdamWStep");
  last_adamw = args;
  return absl::OkStatus();
}

FakeDevice& FakeDevice::Install() {
  static FakeDevice* fake = [] {
    auto* f = new FakeDevice;
    f->before_install = GetDeviceOps(Device::CUDA(0)).status();
    f->ops = std::make_shared<FakeDeviceOps>();
    RegisterAllocator(DeviceType::kCUDA,
                      std::make_shared<HostBackedAllocator>())
        .IgnoreError();
    RegisterDeviceOps(DeviceType::kCUDA, f->ops).IgnoreError();
    return f;
  }();
  return *fake;
}

}  // namespace tandem
