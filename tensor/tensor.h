// tandem::Tensor — a contiguous, row-major n-d array with shared storage and
// micrograd-sized autograd.
//
// A Tensor is a handle: copying it aliases the same tensor (like torch),
// and `const` is shallow (a const Tensor& still lets you write the data).
// Every tensor views a Storage (tensor/allocator.h) at an element offset, so
// several tensors can alias one flat buffer — that is how DDP buckets alias
// gradients:
//
//   TANDEM_ASSIGN_OR_RETURN(Tensor flat, Tensor::Zeros({10}));
//   TANDEM_ASSIGN_OR_RETURN(Tensor g, flat.View(/*offset=*/4, {2, 3}));
//   g.data<float>()[0] = 1.f;             // flat.data<float>()[4] == 1
//   TANDEM_RETURN_IF_ERROR(w.set_grad(g)); // backward now accumulates into
//   flat
//
// Autograd: ops in tensor/ops.h record a node on their output when grad mode
// is on (see NoGradGuard in tensor/autograd/autograd.h) and an input requires
// grad.
//
//   TANDEM_ASSIGN_OR_RETURN(Tensor w, Tensor::Ones({3}));
//   TANDEM_RETURN_IF_ERROR(w.set_requires_grad(true));
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, Mul(w, w));
//   TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(y));
//   TANDEM_RETURN_IF_ERROR(loss.Backward());  // w.grad() == [2, 2, 2]
//
// Thread-safety: a tensor and the graph it belongs to are used by one thread
// at a time (each simulated rank owns its model). Different graphs may run
// forward and backward concurrently on different threads; nothing global is
// shared but the allocator registry (locked) and an atomic node counter.
// Reading the same tensor from several threads is fine; writing its data
// while another thread reads it is a race the caller must order.
//
// Errors are absl::Status values whose messages name the shapes and dtypes
// involved; nothing here aborts.
#ifndef TANDEM_TENSOR_TENSOR_H_
#define TANDEM_TENSOR_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"
#include "tensor/allocator.h"
#include "tensor/device.h"

namespace tandem {

struct TensorImpl;  // tensor/tensor_impl.h (internal)
class Tensor;

using Shape = std::vector<int64_t>;

// "[2, 3]"; "[]" for a 0-d (scalar) shape.
std::string ShapeToString(absl::Span<const int64_t> shape);
// Product of the dims; InvalidArgument for a negative dim or int64 overflow.
absl::StatusOr<int64_t> NumelOf(absl::Span<const int64_t> shape);

// Identifies a hook for removal.
using HookHandle = int64_t;
// Runs on the leaf's owning thread, inside Backward(), once the leaf's
// gradient for this backward pass is complete. `param` is the leaf.
using PostAccumulateGradHook = std::function<void(Tensor& param)>;

struct BackwardOptions {
  // Keep the graph's saved tensors so Backward can run through it again.
  // Otherwise (the default, as in PyTorch) each node's closure is released
  // once it has run, and a second Backward through it is an error.
  bool retain_graph = false;
};

class Tensor {
 public:
  // An undefined tensor (defined() == false): no storage, no shape. Most
  // accessors return empty values; ops reject it with an error.
  Tensor() = default;

  // ---- Factories. Negative dims, a device without an allocator, or an
  // allocation failure come back as errors. Shape {} is a 0-d scalar.
  // Uninitialised contents.
  static absl::StatusOr<Tensor> Empty(Shape shape, DType dtype = DType::kF32,
                                      Device device = Device::CPU());
  static absl::StatusOr<Tensor> Zeros(Shape shape, DType dtype = DType::kF32,
                                      Device device = Device::CPU());
  static absl::StatusOr<Tensor> Ones(Shape shape, DType dtype = DType::kF32,
                                     Device device = Device::CPU());
  // Every element is `value` converted to `dtype` (see To() for the rules).
  static absl::StatusOr<Tensor> Full(Shape shape, double value,
                                     DType dtype = DType::kF32,
                                     Device device = Device::CPU());
  // A 0-d CPU tensor holding `value`.
  static absl::StatusOr<Tensor> Scalar(double value, DType dtype = DType::kF32);
  // A CPU tensor with dtype DTypeOf<T> holding a copy of `values`, whose
  // size must equal the shape's element count (InvalidArgument otherwise,
  // naming both). The one-argument form makes a 1-d tensor.
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(const std::vector<T>& values,
                                           Shape shape) {
    return FromBuffer(values.data(), static_cast<int64_t>(values.size()),
                      DTypeOf<T>::value, std::move(shape));
  }
  template <typename T>
  static absl::StatusOr<Tensor> FromVector(const std::vector<T>& values) {
    return FromVector(values, Shape{static_cast<int64_t>(values.size())});
  }
  // Untyped form of FromVector: copies `count` elements of `dtype` from the
  // host pointer `src`.
  static absl::StatusOr<Tensor> FromBuffer(const void* src, int64_t count,
                                           DType dtype, Shape shape);

  // ---- Metadata.
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t ndim() const;
  // Size of dim i; negative i counts from the end (-1 is the last dim).
  // Returns -1 when i is out of range (or the tensor is undefined).
  int64_t dim(int64_t i) const;
  int64_t numel() const;
  int64_t nbytes() const;  // numel() * DTypeSize(dtype())
  DType dtype() const;
  Device device() const;
  // Where this tensor starts in its storage, in elements.
  int64_t storage_offset() const;
  const std::shared_ptr<Storage>& storage() const;
  // Whether both tensors view the same allocation (possibly disjoint parts).
  bool SharesStorageWith(const Tensor& other) const;

  // ---- Data access. Pointers are into the device's memory (host memory for
  // CPU tensors) and stay valid while any tensor views the storage.
  // The first element; nullptr for an undefined tensor or an empty storage.
  void* raw_data() const;
  // Typed pointer; nullptr when T does not match dtype() (e.g. data<float>()
  // on an f64 tensor) or the tensor is undefined. Use CheckedData for a
  // Status that explains the mismatch.
  template <typename T>
  T* data() const {
    if (!defined() || dtype() != DTypeOf<T>::value) return nullptr;
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  absl::StatusOr<T*> CheckedData() const {
    absl::Status s = CheckAccess(DTypeOf<T>::value, /*need_cpu=*/false);
    if (!s.ok()) return s;
    return static_cast<T*>(raw_data());
  }
  // A host copy of the elements (CPU tensors; dtype must match T).
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const {
    absl::Status s = CheckAccess(DTypeOf<T>::value, /*need_cpu=*/true);
    if (!s.ok()) return s;
    const T* p = static_cast<const T*>(raw_data());
    return std::vector<T>(p, p + numel());
  }
  // The single element of a numel()==1 tensor, as a double. On a device it
  // is copied to the host first (waiting for the device's queued work).
  absl::StatusOr<double> Item() const;

  // ---- Views: share storage, never copy. Differentiable.
  // `shape` starting `offset` elements after this tensor's first element;
  // offset + numel(shape) must fit inside this tensor.
  absl::StatusOr<Tensor> View(int64_t offset, Shape shape) const;
  // Same elements, new shape (one dim may be -1 to infer it).
  absl::StatusOr<Tensor> Reshape(Shape shape) const;

  // ---- Copies and conversions.
  // A new tensor with its own storage holding the same values.
  // Differentiable.
  absl::StatusOr<Tensor> Clone() const;
  // Shares storage, drops autograd: a leaf with requires_grad() == false.
  Tensor Detach() const;
  // A copy converted to `dtype` (Clone() when already `dtype`), on this
  // tensor's device. Differentiable between floating dtypes. Float -> f16/bf16
  // rounds to nearest even (base/half.h); float -> int truncates toward zero,
  // NaN becomes 0 and out-of-range values saturate.
  absl::StatusOr<Tensor> To(DType dtype) const;
  // A copy on `device` (needs the registered allocators to support the
  // transfer). Not differentiable.
  absl::StatusOr<Tensor> To(Device device) const;
  // Copies src's values into this tensor in place (through aliases too).
  // Shapes and dtypes must be equal; the devices may differ (the device's
  // allocator copies and waits for the copy). Not recorded by autograd.
  // On the CPU a view may overlap its source; on a device it must not.
  absl::Status CopyFrom(const Tensor& src) const;
  // Makes this tensor view `source`'s memory (its storage and offset),
  // keeping its identity: the TensorImpl, shape, gradient, requires_grad and
  // hooks stay, so every handle to this tensor (a module's parameter list, an
  // optimizer, a wrapper) follows. PyTorch's `param.data = source`. Sharded
  // wrappers (ZeRO, FSDP) use it to make parameters views of one flat
  // buffer. `source` must have this tensor's dtype, device and element count
  // (InvalidArgument otherwise, naming both); its shape may differ. What does
  // not follow: tensors that viewed the old memory through their own handle
  // (Detach()ed aliases, autograd's saved tensors, earlier Views). Not
  // recorded by autograd; use it outside a forward/backward pass.
  absl::Status SetData(const Tensor& source) const;
  // SetData that also takes `source`'s dtype (PyTorch's `param.data =
  // source` with a tensor of another dtype): FSDP's mixed precision makes
  // f32 parameters views of a bf16 unit buffer for forward and backward.
  // Only for a leaf without a gradient (its dtype would no longer match:
  // clear it first); device and element count must match, and `source`'s
  // dtype must be floating when this tensor requires grad. InvalidArgument
  // otherwise, naming both tensors.
  absl::Status SetDataWithDtype(const Tensor& source) const;

  // "Tensor(shape=[2, 2], dtype=f32, device=cpu, data=[[1, 2], [3, 4]])";
  // long tensors are elided. For debugging.
  std::string ToString() const;

  // ---- Autograd (see tensor/autograd/autograd.h for grad mode and recording).
  bool requires_grad() const;
  // Makes a leaf (not) require grad. Errors: only floating dtypes may
  // require grad; a non-leaf's flag can't be changed (use Detach()).
  absl::Status set_requires_grad(bool requires_grad) const;
  // True unless the tensor was produced by a recorded op.
  bool is_leaf() const;
  // The recording op's name ("MatMul", "Linear", ...); "" for leaves.
  std::string grad_fn_name() const;

  // The accumulated gradient of a leaf (undefined when none). The result
  // aliases the stored gradient: writing to it changes it. A gradient
  // marked zero (MarkGradZero) is filled with zeros here first, so every
  // reader through grad() sees zeros.
  Tensor grad() const;
  bool has_grad() const;
  // Installs `grad` as the gradient buffer; Backward then ACCUMULATES INTO
  // IT IN PLACE (so a view into a flat bucket receives the gradients).
  // Shape and dtype must match this tensor; an undefined tensor clears.
  absl::Status set_grad(const Tensor& grad) const;
  // Whether the gradient buffer is `view`'s memory (the same storage at the
  // same offset, as set_grad(view) leaves it), without reading it: a
  // gradient marked zero is not filled. False without a gradient.
  bool GradIsViewOf(const Tensor& view) const;
  // Drops the gradient (like zero_grad(set_to_none=True)).
  void ClearGrad() const;
  // Fills an existing gradient with zeros in place, keeping its aliasing
  // (like zero_grad(set_to_none=False)); no-op without a gradient.
  void ZeroGrad() const;
  // Makes an existing gradient read as zero WITHOUT writing it: the buffer
  // and its aliasing are kept, and the next Backward that reaches this leaf
  // overwrites it where it would have added to it (Linear's weight
  // gradient: a GEMM with beta = 0, no 100 MB fill and no read of C per
  // step); later contributions, in the same or a later Backward, add as
  // usual. grad() fills the zeros first if the gradient is read before a
  // Backward wrote it; set_grad, ClearGrad and ZeroGrad drop the mark.
  // No-op without a gradient. Same values as ZeroGrad then Backward; an
  // element that comes out exactly -0 may keep its sign where the fill then
  // add gives +0. Only for gradients that nothing writes or reads except
  // through autograd and grad(): code that uses the buffer's storage
  // directly (a flat bucket) must call grad() first (DDP does, for the
  // parameters a step leaves without a gradient). Not thread-safe, as the
  // rest of a leaf's autograd state.
  void MarkGradZero() const;

  // Registers `hook` on a leaf that requires grad; it runs exactly once per
  // Backward that reaches this leaf, after all of that pass's contributions
  // were accumulated into grad(), in the order the leaves' gradients become
  // final. Several hooks run in registration order. Errors on non-leaves and
  // tensors that don't require grad.
  absl::StatusOr<HookHandle> AddPostAccumulateGradHook(
      PostAccumulateGradHook hook) const;
  // False when no hook has this handle.
  bool RemovePostAccumulateGradHook(HookHandle handle) const;

  // Back-propagates from this tensor: accumulates d(this)/d(leaf) into every
  // leaf that requires grad, then fires hooks as leaves become final. The
  // no-argument form needs numel() == 1 (seed 1); otherwise pass `grad`
  // with this tensor's shape and dtype. Errors: tensor doesn't require
  // grad, non-scalar without grad, shape/dtype mismatch, graph already
  // released, or an error from an op's backward. Runs on the calling thread.
  absl::Status Backward(BackwardOptions options = {}) const;
  absl::Status Backward(const Tensor& grad, BackwardOptions options = {}) const;

  // ---- Internals (ops and autograd).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  // OK when defined, dtype == `dtype`, and (if need_cpu) on the CPU;
  // otherwise an error naming what was expected and found.
  absl::Status CheckAccess(DType dtype, bool need_cpu) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_TENSOR_H_
