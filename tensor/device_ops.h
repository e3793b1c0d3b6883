// Device kernels behind tensor/ops.h: the interface a device library (the
// CUDA one in tensor/cuda/) implements and registers, so that the ops in
// tensor/ops*.cc dispatch on a tensor's device without including any device
// headers.
//
// Every public op starts with
//
//   TANDEM_ASSIGN_OR_RETURN(DeviceOps* dev, internal::DeviceOpsFor({a, b}));
//   if (dev != nullptr) return dev->Binary(BinaryOp::kAdd, a, b);
//
// where DeviceOpsFor returns nullptr when every defined input is on the CPU
// (the CPU path below it is unchanged), the registered DeviceOps of the
// first non-CPU input otherwise, and FailedPrecondition when none is
// registered for that device type (a build without CUDA, or a binary that
// does not link //tensor/cuda).
//
// An implementation checks its arguments (all on one device, dtypes, shapes)
// with the same rules and messages as the CPU ops, computes the result on
// the device, and records autograd nodes whose backward runs on the device.
// Results are in the device's stream order: an op returns once its work is
// queued; errors found only while the work runs surface at the next
// synchronising call (a copy to the host, Item(), cuda::Synchronize).
//
// Thread-safety: RegisterDeviceOps/GetDeviceOps are guarded by a mutex; a
// registered DeviceOps lives until the process exits (so a pointer returned
// by GetDeviceOps never dangles) and must be safe to call from any thread.
#ifndef TANDEM_TENSOR_DEVICE_OPS_H_
#define TANDEM_TENSOR_DEVICE_OPS_H_

#include <cstdint>
#include <initializer_list>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/device.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {

enum class BinaryOp : int8_t { kAdd, kSub, kMul, kDiv };

// Elementwise functions; the k*Scalar kinds combine x with a double scalar
// (converted to x's dtype), e.g. kMulScalar is x * scalar.
enum class UnaryOp : int8_t {
  kNeg,
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kAddScalar,
  kSubScalar,
  kMulScalar,
  kDivScalar,
};

// One Sgd step on one parameter (tensor/optim/sgd.h has the formula).
struct SgdStepArgs {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  // The momentum buffer is new: set it to the gradient instead of mixing.
  bool first = false;
};

// One AdamW step on one parameter (tensor/optim/adamw.h); the scalars are
// computed on the host in double exactly as the CPU update does.
struct AdamWStepArgs {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double decay = 1;       // 1 - lr * weight_decay
  double step_size = 0;   // lr / (1 - beta1^t)
  double bias2_sqrt = 1;  // sqrt(1 - beta2^t)
  bool amsgrad = false;
  bool maximize = false;
};

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  // The ops of tensor/ops.h, same contracts (shapes, broadcasting, errors,
  // autograd), on the inputs' device.
  virtual absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b,
                                        bool transpose_a, bool transpose_b) = 0;
  virtual absl::StatusOr<Tensor> Linear(const Tensor& x, const Tensor& weight,
                                        const Tensor& bias) = 0;
  virtual absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a,
                                        const Tensor& b) = 0;
  // `scalar` is used by the k*Scalar kinds only.
  virtual absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x,
                                       double scalar) = 0;
  virtual absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim,
                                         bool log) = 0;
  // Over all elements (0-d result); mean divides by numel.
  virtual absl::StatusOr<Tensor> SumAll(const Tensor& x, bool mean) = 0;
  virtual absl::StatusOr<Tensor> SumDim(const Tensor& x, int64_t dim,
                                        bool keepdim, bool mean) = 0;
  virtual absl::StatusOr<Tensor> Argmax(const Tensor& x, int64_t dim) = 0;
  virtual absl::StatusOr<Tensor> Conv2d(const Tensor& x, const Tensor& weight,
                                        const Tensor& bias,
                                        const Conv2dOptions& options) = 0;
  virtual absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                           const MaxPool2dOptions& options) = 0;
  virtual absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits,
                                              const Tensor& labels) = 0;
  virtual absl::StatusOr<Tensor> Mse(const Tensor& prediction,
                                     const Tensor& target) = 0;

  // In place, never recorded.
  virtual absl::Status AddInPlace(const Tensor& dst, const Tensor& src,
                                  double alpha) = 0;
  virtual absl::Status ScaleInPlace(const Tensor& dst, double factor) = 0;
  virtual absl::Status FillInPlace(const Tensor& dst, double value) = 0;
  // dst = src converted elementwise (tensor/convert.h's rules); same element
  // count, both on this device, any dtypes. Not recorded.
  virtual absl::Status Convert(const Tensor& src, const Tensor& dst) = 0;

  // Optimizer updates, in place on the parameter and its state. `buffer`
  // (Sgd, may be undefined without momentum) and `max_exp_avg_sq` (AdamW,
  // undefined without amsgrad) have the parameter's shape and dtype.
  virtual absl::Status SgdStep(const Tensor& param, const Tensor& grad,
                               const Tensor& buffer,
                               const SgdStepArgs& args) = 0;
  virtual absl::Status AdamWStep(const Tensor& param, const Tensor& grad,
                                 const Tensor& exp_avg,
                                 const Tensor& exp_avg_sq,
                                 const Tensor& max_exp_avg_sq,
                                 const AdamWStepArgs& args) = 0;
};

// Installs `ops` for every device of `type` (kCPU is refused: the CPU ops are
// built in). Replacing an earlier registration keeps the earlier object
// alive. InvalidArgument for null or kCPU.
absl::Status RegisterDeviceOps(DeviceType type, std::shared_ptr<DeviceOps> ops);

// The ops registered for `device` (never the CPU); FailedPrecondition naming
// the device when none is.
absl::StatusOr<DeviceOps*> GetDeviceOps(Device device);

namespace internal {

// nullptr when every defined tensor in `tensors` is on the CPU; otherwise
// GetDeviceOps of the first one that is not.
absl::StatusOr<DeviceOps*> DeviceOpsFor(std::initializer_list<Tensor> tensors);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_TENSOR_DEVICE_OPS_H_
