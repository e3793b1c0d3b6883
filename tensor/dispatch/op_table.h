// The kernel table behind tensor/ops.h: one row per op, one kernel per
// DeviceType in each row (ATen's dispatch table, in far less code). An op is
// defined once (tensor/ops/: argument checks with their messages, the
// autograd formula) and looks its kernel up here by the device its inputs
// are on; every device library registers the kernels it has next to its own
// code:
//
//   // tensor/dispatch/op_kernels.h: the row, declared once
//   TANDEM_OP_ROW(GeluKernels, PointwiseKernel, "Gelu")
//
//   // tensor/cuda/ops/gelu.cc
//   TANDEM_REGISTER_KERNEL(GeluKernels(), DeviceType::kCUDA, CudaGelu);
//
//   // the op's definition
//   TANDEM_ASSIGN_OR_RETURN(PointwiseKernel* kernel,
//                           GeluKernels().For(device));
//   TANDEM_RETURN_IF_ERROR(kernel(out, {x}, attr));
//
// Every row is declared one way, with TANDEM_OP_ROW in a header of
// tensor/dispatch/ (op_kernels.h, or the op's own *_kernels.h): an
// accessor function, so the op, each device library and each test name the
// row by a C++ identifier the compiler checks. Rows are found by name once
// (when an OpKernels is constructed or a kernel registered, in any order:
// registration at static-initialisation time may come first), never per call:
// For() is one acquire load of a function pointer. A kernel's C++ signature is
// part of its row: registering or looking up a row under a second signature
// poisons that use (its lookups fail with both signatures named), so a mismatch
// is an error, not a call through the wrong type. docs/adding_an_op.md walks
// through adding an op.
//
// Thread-safety: rows and registrations are guarded by one mutex; rows live
// until the process exits, so OpKernels and the pointers For() returns never
// dangle. Registering a kernel for a device type replaces the earlier one
// (tests install fakes this way); a call already past For() finishes on the
// kernel it found.
#ifndef TANDEM_TENSOR_DISPATCH_OP_TABLE_H_
#define TANDEM_TENSOR_DISPATCH_OP_TABLE_H_

#include <array>
#include <atomic>
#include <string>
#include <typeinfo>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem {

// The signature of elementwise kernels, shared by every op that maps
// inputs to `out` element by element: out[i] = f(inputs[0][i], ...; attr).
// The op's definition has checked everything (one device, one dtype, equal
// element counts, contiguous) and allocated `out` on that device; the kernel
// only computes. `attr` is the op's one scalar attribute (0 when it has
// none).
using PointwiseKernel = absl::Status(const Tensor& out,
                                     absl::Span<const Tensor> inputs,
                                     double attr);

namespace internal {

using AnyKernel = void (*)();

// One op: its name, the signature its kernels have, a kernel per device
// type (null: none registered).
struct OpRow {
  std::string name;
  std::string signature;  // typeid(Fn).name() of the kernel type
  std::array<std::atomic<AnyKernel>, kNumDeviceTypes> kernels{};
  // Set on a poisoned row (a second signature for `name`): what For() says.
  std::string conflict;
};

// The row of `name` for kernels of `signature`, created on first use; a
// poisoned stand-in when `name` already has another signature. Thread-safe.
OpRow* FindOrAddOpRow(const char* name, const char* signature);

// Stores `kernel` in `row` for `type` (null clears it). InvalidArgument when
// `row` is poisoned. Thread-safe.
absl::Status SetKernel(OpRow* row, DeviceType type, AnyKernel kernel);

// The FailedPrecondition of a missing kernel: names the op and the device,
// and the likely cause (CUDA not built or not linked, simulated devices not
// installed, or this op lacking a kernel there).
absl::Status MissingKernel(const OpRow& row, Device device);

// True when any op has a kernel for `type` (the device library is linked
// and registered).
bool HasAnyKernel(DeviceType type);

// "<op>: <device types with a kernel>" for every row, sorted by name (docs
// and tests).
std::vector<std::string> DescribeKernelTable();

}  // namespace internal

namespace internal {
// The key of OpKernels' constructor: a row's name, handed over by
// TANDEM_OP_ROW (and by the table's own tests).
struct OpRowKey {
  const char* name;
};
}  // namespace internal

// A typed handle on one op's row. Cheap to copy; declared once per row by
// TANDEM_OP_ROW (below), whose accessor the op and the device libraries
// call; For() per op call.
template <typename Fn>
class OpKernels {
 public:
  // Declare rows with TANDEM_OP_ROW, not with this constructor: the key
  // keeps row names out of the ops, so a misspelt row is a compile error
  // (an unknown accessor) instead of a "no kernel" at run time.
  explicit OpKernels(internal::OpRowKey key)
      : row_(internal::FindOrAddOpRow(key.name, typeid(Fn).name())) {}

  const std::string& name() const { return row_->name; }

  // The kernel for `device`'s type; FailedPrecondition naming the op and
  // the device when none is registered (or the row is poisoned).
  absl::StatusOr<Fn*> For(Device device) const {
    internal::AnyKernel k =
        row_->kernels[static_cast<size_t>(device.type())].load(
            std::memory_order_acquire);
    if (k == nullptr) return internal::MissingKernel(*row_, device);
    return reinterpret_cast<Fn*>(k);
  }

  // Installs `kernel` for every device of `type`, replacing an earlier one
  // (null removes it). InvalidArgument when this handle's row is poisoned.
  absl::Status Register(DeviceType type, Fn* kernel) const {
    return internal::SetKernel(row_, type,
                               reinterpret_cast<internal::AnyKernel>(kernel));
  }

  // Register() for TANDEM_REGISTER_KERNEL: a failure (a signature conflict)
  // is what the op's lookups then report.
  bool RegisterAtStart(DeviceType type, Fn* kernel) const {
    Register(type, kernel).IgnoreError();
    return true;
  }

 private:
  internal::OpRow* row_;
};

// Registers `kernel` for `type` in the row of `op` (an OpKernels
// expression, e.g. GeluKernels() or BinaryKernels())
// when the enclosing library is loaded. Use at namespace scope in the device
// library's own file; the library must be linked whole (alwayslink) or hold
// the op's definition, or the registration is dropped with the file.
#define TANDEM_REGISTER_KERNEL(op, type, kernel) \
  TANDEM_REGISTER_KERNEL_AT(op, type, kernel, __COUNTER__)
#define TANDEM_REGISTER_KERNEL_AT(op, type, kernel, n) \
  TANDEM_REGISTER_KERNEL_CAT(op, type, kernel, n)
#define TANDEM_REGISTER_KERNEL_CAT(op, type, kernel, n)             \
  [[maybe_unused]] static const bool tandem_kernel_registered_##n = \
      (op).RegisterAtStart(type, kernel)

}  // namespace tandem

// Declares a row: `accessor()` returns the row of kernels of signature `Fn`
// named `name` (a function-local static, so static initialisers of any
// library may register into it). Used at namespace scope in tandem's
// namespace, once per row, in a header of tensor/dispatch/.
#define TANDEM_OP_ROW(accessor, Fn, name)                              \
  inline const OpKernels<Fn>& accessor() {                             \
    static const OpKernels<Fn>* const row =                            \
        new OpKernels<Fn>(internal::OpRowKey{name}); /* never freed */ \
    return *row;                                                       \
  }

#endif  // TANDEM_TENSOR_DISPATCH_OP_TABLE_H_
