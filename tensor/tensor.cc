// Tensor: factories, metadata, data access, copies, conversions, ToString.
// Views live in ops/shape.cc and autograd methods in autograd/autograd.cc.
#include "tensor/tensor.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/convert.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/tensor_impl.h"

namespace tandem {
namespace {

const Shape& EmptyShape() {
  static const Shape* shape = new Shape();
  return *shape;
}

const std::shared_ptr<Storage>& NullStorage() {
  static const auto* storage = new std::shared_ptr<Storage>();
  return *storage;
}

// Appends elements [begin, begin + prod(shape[d:])) as nested brackets,
// eliding the middle of dims longer than 6.
void AppendNested(const Tensor& t, int64_t d, int64_t begin,
                  const std::vector<int64_t>& strides, std::string* out) {
  if (d == t.ndim()) {
    const double v = internal::ElementAsDouble(t.raw_data(), t.dtype(), begin);
    if (IsFloatingPoint(t.dtype())) {
      absl::StrAppend(out, absl::StrFormat("%g", v));
    } else {
      absl::StrAppend(out, static_cast<int64_t>(v));
    }
    return;
  }
  const int64_t size = t.dim(d);
  out->push_back('[');
  const bool elide = size > 6;
  for (int64_t i = 0; i < size; ++i) {
    if (elide && i == 3) {
      out->append(", ...");
      i = size - 3;
    }
    if (i > 0) out->append(", ");
    AppendNested(t, d + 1, begin + i * strides[d], strides, out);
  }
  out->push_back(']');
}

}  // namespace

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<int64_t> NumelOf(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape),
                       " has a negative dimension; sizes must be >= 0"));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeToString(shape), " has more than 2^63 elements"));
    }
    n *= d;
  }
  return n;
}

// ---- Factories.

absl::StatusOr<Tensor> Tensor::Empty(Shape shape, DType dtype, Device device) {
  TANDEM_ASSIGN_OR_RETURN(int64_t numel, NumelOf(shape));
  const int64_t esize = DTypeSize(dtype);
  if (numel > std::numeric_limits<int64_t>::max() / esize) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeToString(shape), " of ", DTypeName(dtype),
                     " needs more than 2^63 bytes"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage,
                          Storage::Allocate(device, numel * esize));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->numel = numel;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

absl::StatusOr<Tensor> Tensor::Full(Shape shape, double value, DType dtype,
                                    Device device) {
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Empty(std::move(shape), dtype, device));
  if (!device.is_cpu()) {
    TANDEM_RETURN_IF_ERROR(FillInPlace(t, value));  // the device's kernel
    return t;
  }
  internal::FillElements(t.raw_data(), dtype, t.numel(), value);
  return t;
}

absl::StatusOr<Tensor> Tensor::Zeros(Shape shape, DType dtype, Device device) {
  return Full(std::move(shape), 0.0, dtype, device);
}

absl::StatusOr<Tensor> Tensor::Ones(Shape shape, DType dtype, Device device) {
  return Full(std::move(shape), 1.0, dtype, device);
}

absl::StatusOr<Tensor> Tensor::Scalar(double value, DType dtype) {
  return Full(Shape{}, value, dtype, Device::CPU());
}

absl::StatusOr<Tensor> Tensor::FromBuffer(const void* src, int64_t count,
                                          DType dtype, Shape shape) {
  TANDEM_ASSIGN_OR_RETURN(int64_t numel, NumelOf(shape));
  if (numel != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FromVector: ", count, " values cannot fill shape ",
        ShapeToString(shape), ", which has ", numel,
        " elements; pass a shape whose sizes multiply to ", count));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Empty(std::move(shape), dtype));
  if (numel > 0) std::memcpy(t.raw_data(), src, t.nbytes());
  return t;
}

// ---- Metadata.

const Shape& Tensor::shape() const {
  return impl_ ? impl_->shape : EmptyShape();
}
int64_t Tensor::ndim() const {
  return impl_ ? static_cast<int64_t>(impl_->shape.size()) : 0;
}
int64_t Tensor::dim(int64_t i) const {
  const int64_t n = ndim();
  if (i < 0) i += n;
  if (!impl_ || i < 0 || i >= n) return -1;
  return impl_->shape[i];
}
int64_t Tensor::numel() const { return impl_ ? impl_->numel : 0; }
int64_t Tensor::nbytes() const {
  return impl_ ? impl_->numel * DTypeSize(impl_->dtype) : 0;
}
DType Tensor::dtype() const { return impl_ ? impl_->dtype : DType::kF32; }
Device Tensor::device() const {
  return impl_ ? impl_->storage->device() : Device::CPU();
}
int64_t Tensor::storage_offset() const { return impl_ ? impl_->offset : 0; }
const std::shared_ptr<Storage>& Tensor::storage() const {
  return impl_ ? impl_->storage : NullStorage();
}
bool Tensor::SharesStorageWith(const Tensor& other) const {
  return impl_ && other.impl_ && impl_->storage == other.impl_->storage;
}

void* Tensor::raw_data() const {
  if (!impl_ || impl_->storage->data() == nullptr) return nullptr;
  return static_cast<char*>(impl_->storage->data()) +
         impl_->offset * DTypeSize(impl_->dtype);
}

absl::Status Tensor::CheckAccess(DType dtype, bool need_cpu) const {
  if (!impl_) {
    return absl::FailedPreconditionError(
        "the tensor is undefined (default-constructed); create it with a "
        "factory such as Tensor::Zeros");
  }
  if (impl_->dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype mismatch: asked for ", DTypeName(dtype),
        " elements of a tensor of dtype ", DTypeName(impl_->dtype),
        " and shape ", ShapeToString(impl_->shape),
        "; convert with To(DType) or use the matching element type"));
  }
  if (need_cpu && !device().is_cpu()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the tensor lives on ", device().ToString(),
                     "; copy it to the CPU with To(Device::CPU()) first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> Tensor::Item() const {
  if (defined() && !device().is_cpu() && numel() == 1) {
    // One element copied to the host (waits for the device's queued work).
    TANDEM_ASSIGN_OR_RETURN(Tensor host, To(Device::CPU()));
    return host.Item();
  }
  TANDEM_RETURN_IF_ERROR(CheckAccess(dtype(), /*need_cpu=*/true));
  if (numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Item() needs exactly one element; the tensor has shape ",
                     ShapeToString(shape()), " (", numel(), " elements)"));
  }
  return internal::ElementAsDouble(raw_data(), dtype(), 0);
}

// ---- Copies and conversions.

namespace {

// out[i] += g[i] converted to D (rounded to nearest when narrowing), for a
// floating CPU tensor g: the gradient of a cast, added in the source dtype.
template <typename D>
void AccumulateConverted(const Tensor& g, D* out) {
  const int64_t n = g.numel();
  auto add = [&](const auto* p) {
    for (int64_t i = 0; i < n; ++i) {
      out[i] += static_cast<D>(static_cast<float>(p[i]));
    }
  };
  switch (g.dtype()) {
    case DType::kBF16:
      return add(g.data<BFloat16>());
    case DType::kF16:
      return add(g.data<Half>());
    case DType::kF32:
      return add(g.data<float>());
    default: {  // f64: narrowed straight to D, as To(D) does
      const double* p = g.data<double>();
      for (int64_t i = 0; i < n; ++i) out[i] += static_cast<D>(p[i]);
      return;
    }
  }
}

// To(DType)'s CPU kernel.
absl::Status CpuConvert(const Tensor& src, const Tensor& dst) {
  internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                            dst.dtype(), src.numel());
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ConvertKernels(), DeviceType::kCPU, CpuConvert);

}  // namespace

Tensor Tensor::Detach() const {
  if (!impl_) return Tensor();
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->numel = impl_->numel;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

absl::StatusOr<Tensor> Tensor::To(DType dtype) const {
  TANDEM_RETURN_IF_ERROR(CheckAccess(this->dtype(), /*need_cpu=*/false));
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Empty(shape(), dtype, device()));
  TANDEM_ASSIGN_OR_RETURN(ConvertKernel * convert,
                          ConvertKernels().For(device()));
  TANDEM_RETURN_IF_ERROR(convert(*this, out));
  if (IsFloatingPoint(dtype) && ShouldRecord({*this})) {
    const DType from = this->dtype();
    RecordOp(
        dtype == from ? "Clone" : "To", out, {*this},
        [from](const Tensor& g, GradSink& sink) -> absl::Status {
          // A 16-bit cast of an f32 parameter (autocast) sends its
          // gradient straight into the f32 one: no f32 temporary the
          // size of the parameter. Same values as converting first
          // and adding (each element converted, then one f32 add).
          if (g.device().is_cpu() && g.dtype() != from &&
              (from == DType::kF32 || from == DType::kF64)) {
            TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
            if (!buf.accumulate) {
              internal::ConvertElements(g.raw_data(), g.dtype(),
                                        buf.tensor.raw_data(), from, g.numel());
            } else if (from == DType::kF32) {
              AccumulateConverted(g, buf.tensor.data<float>());
            } else {
              AccumulateConverted(g, buf.tensor.data<double>());
            }
            return absl::OkStatus();
          }
          TANDEM_ASSIGN_OR_RETURN(Tensor gx, g.To(from));
          return sink.Add(0, std::move(gx));
        });
  }
  return out;
}

absl::StatusOr<Tensor> Tensor::Clone() const { return To(dtype()); }

absl::StatusOr<Tensor> Tensor::To(Device device) const {
  TANDEM_RETURN_IF_ERROR(CheckAccess(dtype(), /*need_cpu=*/false));
  const Device from = this->device();
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Empty(shape(), dtype(), device));
  // The non-CPU side's allocator knows how to move bytes to and from it.
  const Device owner = device.is_cpu() ? from : device;
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Allocator> allocator,
                          GetAllocator(owner));
  TANDEM_RETURN_IF_ERROR(
      allocator->CopyBytes(out.raw_data(), device, raw_data(), from, nbytes()));
  return out;
}

absl::Status Tensor::CopyFrom(const Tensor& src) const {
  TANDEM_RETURN_IF_ERROR(CheckAccess(dtype(), /*need_cpu=*/false));
  if (!src.defined()) {
    return absl::InvalidArgumentError("CopyFrom: the source is undefined");
  }
  if (src.shape() != shape() || src.dtype() != dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CopyFrom: destination is ", DTypeName(dtype()), ShapeToString(shape()),
        " but source is ", DTypeName(src.dtype()), ShapeToString(src.shape()),
        "; shapes and dtypes must match (Reshape or To(DType) first)"));
  }
  if (!src.device().is_cpu() || !device().is_cpu()) {
    // The non-CPU side's allocator moves the bytes (and waits for them).
    const Device owner = device().is_cpu() ? src.device() : device();
    TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Allocator> allocator,
                            GetAllocator(owner));
    return allocator->CopyBytes(raw_data(), device(), src.raw_data(),
                                src.device(), nbytes());
  }
  // memmove: a view may overlap its source.
  if (nbytes() > 0) std::memmove(raw_data(), src.raw_data(), nbytes());
  return absl::OkStatus();
}

absl::Status Tensor::SetData(const Tensor& source) const {
  if (!impl_ || !source.impl_) {
    return absl::InvalidArgumentError(
        "SetData: both tensors must be defined (created by a factory such as "
        "Tensor::Zeros)");
  }
  if (source.dtype() != dtype() || source.device() != device() ||
      source.numel() != numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetData: this tensor is ", DTypeName(dtype()), ShapeToString(shape()),
        " on ", device().ToString(), " but the source is ",
        DTypeName(source.dtype()), ShapeToString(source.shape()), " on ",
        source.device().ToString(),
        "; dtype, device and element count must match"));
  }
  impl_->storage = source.impl_->storage;
  impl_->offset = source.impl_->offset;
  return absl::OkStatus();
}

absl::Status Tensor::SetDataWithDtype(const Tensor& source) const {
  if (!impl_ || !source.impl_) {
    return absl::InvalidArgumentError(
        "SetDataWithDtype: both tensors must be defined (created by a factory "
        "such as Tensor::Zeros)");
  }
  if (source.device() != device() || source.numel() != numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetDataWithDtype: this tensor is ", DTypeName(dtype()),
        ShapeToString(shape()), " on ", device().ToString(),
        " but the source is ", DTypeName(source.dtype()),
        ShapeToString(source.shape()), " on ", source.device().ToString(),
        "; device and element count must match"));
  }
  if (source.dtype() != dtype()) {
    if (!is_leaf() || grad().defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SetDataWithDtype: a ", DTypeName(dtype()), " tensor can take ",
          DTypeName(source.dtype()),
          " memory only as a leaf without a gradient; clear its gradient "
          "(ClearGrad) first"));
    }
    if (requires_grad() && !IsFloatingPoint(source.dtype())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SetDataWithDtype: this tensor requires grad but the source is ",
          DTypeName(source.dtype()), "; only floating dtypes carry gradients"));
    }
  }
  impl_->storage = source.impl_->storage;
  impl_->offset = source.impl_->offset;
  impl_->dtype = source.impl_->dtype;
  return absl::OkStatus();
}

std::string Tensor::ToString() const {
  if (!impl_) return "Tensor(undefined)";
  std::string out = absl::StrCat("Tensor(shape=", ShapeToString(shape()),
                                 ", dtype=", DTypeName(dtype()),
                                 ", device=", device().ToString());
  if (requires_grad()) {
    absl::StrAppend(&out, ", requires_grad=true");
    if (!is_leaf()) absl::StrAppend(&out, ", grad_fn=", grad_fn_name());
  }
  if (device().is_cpu()) {
    std::vector<int64_t> strides(shape().size(), 1);
    for (int64_t d = ndim() - 2; d >= 0; --d) {
      strides[d] = strides[d + 1] * shape()[d + 1];
    }
    out.append(", data=");
    AppendNested(*this, 0, 0, strides, &out);
  }
  out.push_back(')');
  return out;
}

}  // namespace tandem
