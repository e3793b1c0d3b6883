// Test-only: a stand-in "CUDA" device whose memory is host memory, for
// testing device dispatch (the kernel table, tensor/dispatch/op_table.h) on
// machines without a GPU.
//
//   FakeDevice& fake = FakeDevice::Install();  // once per process
//   Tensor t = Tensor::Zeros({2}, DType::kF32, Device::CUDA(0)).value();
//   // fake.kernels->calls() == {"FillInPlace"}; t.raw_data() is host memory
//
// Install() registers a host-backed allocator (with memcpy copies) and a
// fake kernel for DeviceType::kCUDA in every row of
// tensor/dispatch/op_kernels.h, replacing whatever was registered; it must not
// be linked together with
// //tensor/cuda. Each fake kernel records its row's name; the in-place ops,
// Convert and the optimizer steps do their work on the host memory
// (Fill/Convert for real, the others record only), every other kernel
// returns Unimplemented("fake device: <op>"). Ops without a row there (e.g.
// Gelu) get no fake: they report the missing kernel.
// Thread-safety: the record is guarded by a mutex (rank threads may share
// the fake device); tests read it between calls.
#ifndef TANDEM_TENSOR_TESTING_FAKE_DEVICE_H_
#define TANDEM_TENSOR_TESTING_FAKE_DEVICE_H_

#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tensor/dispatch/op_kernels.h"

namespace tandem {

class FakeKernels {
 public:
  // Row names of the calls so far, in call order.
  std::vector<std::string> calls() const;
  void ClearCalls();
  SgdStepArgs last_sgd() const;
  AdamWStepArgs last_adamw() const;

  // Used by the fake kernels.
  void Record(const char* op);
  void RecordSgd(const SgdStepArgs& args);
  void RecordAdamW(const AdamWStepArgs& args);

 private:
  mutable std::mutex mu_;
  std::vector<std::string> calls_;  // guarded by mu_
  SgdStepArgs last_sgd_;            // guarded by mu_
  AdamWStepArgs last_adamw_;        // guarded by mu_
};

struct FakeDevice {
  // Registers the fake on first call; later calls return the same object.
  static FakeDevice& Install();

  FakeKernels* kernels = nullptr;  // lives until the process exits
  // What a kernel lookup for Device::CUDA(0) said before the fake was
  // registered.
  absl::Status before_install;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_TESTING_FAKE_DEVICE_H_
