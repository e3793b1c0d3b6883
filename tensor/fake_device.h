// Test-only: a stand-in "CUDA" device whose memory is host memory, for
// testing device dispatch (tensor/device_ops.h) on machines without a GPU.
//
//   FakeDevice& fake = FakeDevice::Install();  // once per process
//   Tensor t = Tensor::Zeros({2}, DType::kF32, Device::CUDA(0)).value();
//   // fake.ops->calls == {"FillInPlace"}; t.raw_data() is host memory
//
// Install() registers a host-backed allocator (with memcpy copies) and a
// FakeDeviceOps for DeviceType::kCUDA, replacing whatever was registered;
// it must not be linked together with //tensor/cuda. FakeDeviceOps records
// every call; the in-place ops, Convert and the optimizer steps do their
// work on the host memory (Fill/Convert for real, the others record only),
// every other op returns Unimplemented("fake device: <Method>").
// Thread-compatible: tests use it from one thread.
#ifndef TANDEM_TENSOR_FAKE_DEVICE_H_
#define TANDEM_TENSOR_FAKE_DEVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tensor/device_ops.h"

namespace tandem {

class FakeDeviceOps : public DeviceOps {
 public:
  std::vector<std::string> calls;  // method names, in call order
  SgdStepArgs last_sgd;
  AdamWStepArgs last_adamw;

  absl::StatusOr<Tensor> MatMul(const Tensor&, const Tensor&, bool,
                                bool) override;
  absl::StatusOr<Tensor> Linear(const Tensor&, const Tensor&,
                                const Tensor&) override;
  absl::StatusOr<Tensor> Binary(BinaryOp, const Tensor&,
                                const Tensor&) override;
  absl::StatusOr<Tensor> Unary(UnaryOp, const Tensor&, double) override;
  absl::StatusOr<Tensor> Softmax(const Tensor&, int64_t, bool) override;
  absl::StatusOr<Tensor> SumAll(const Tensor&, bool) override;
  absl::StatusOr<Tensor> SumDim(const Tensor&, int64_t, bool, bool) override;
  absl::StatusOr<Tensor> Argmax(const Tensor&, int64_t) override;
  absl::StatusOr<Tensor> Conv2d(const Tensor&, const Tensor&, const Tensor&,
                                const Conv2dOptions&) override;
  absl::StatusOr<Tensor> MaxPool2d(const Tensor&,
                                   const MaxPool2dOptions&) override;
  absl::StatusOr<Tensor> CrossEntropy(const Tensor&, const Tensor&) override;
  absl::StatusOr<Tensor> Mse(const Tensor&, const Tensor&) override;
  absl::Status AddInPlace(const Tensor&, const Tensor&, double) override;
  absl::Status ScaleInPlace(const Tensor&, double) override;
  absl::Status FillInPlace(const Tensor& dst, double value) override;
  absl::Status Convert(const Tensor& src, const Tensor& dst) override;
  absl::Status SgdStep(const Tensor&, const Tensor&, const Tensor&,
                       const SgdStepArgs& args) override;
  absl::Status AdamWStep(const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&,
                         const AdamWStepArgs& args) override;
};

struct FakeDevice {
  // Registers the fake on first call; later calls return the same object.
  static FakeDevice& Install();

  std::shared_ptr<FakeDeviceOps> ops;
  // What GetDeviceOps(Device::CUDA(0)) said before the fake was registered.
  absl::Status before_install;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_FAKE_DEVICE_H_
