// Views: Reshape, Flatten, Tensor::View, Tensor::Reshape. They share the
// input's storage and record a backward that routes the gradient back.
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"
#include "tensor/tensor_impl.h"

namespace tandem {
namespace {

using internal::Describe;

// A new handle on x's storage starting `offset` elements after x's first
// element.
Tensor MakeView(const Tensor& x, int64_t offset, Shape shape, int64_t numel) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->offset = x.storage_offset() + offset;
  impl->shape = std::move(shape);
  impl->numel = numel;
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

// Resolves one -1 and checks the element count.
absl::StatusOr<Shape> InferShape(const Tensor& x, Shape shape) {
  int64_t known = 1;
  int64_t infer_at = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[d] == -1 && infer_at < 0) {
      infer_at = d;
    } else if (shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Reshape: invalid target shape ", ShapeToString(shape), " for ",
          Describe(x), "; sizes must be >= 0 with at most one -1"));
    } else {
      known *= shape[d];
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reshape: cannot infer the -1 in ", ShapeToString(shape),
                       " for ", Describe(x), " (", x.numel(), " elements)"));
    }
    shape[infer_at] = x.numel() / known;
    known = x.numel();
  }
  if (known != x.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Reshape: shape ", ShapeToString(shape), " has ", known,
        " elements but the input ", Describe(x), " has ", x.numel()));
  }
  return shape;
}

}  // namespace

absl::StatusOr<Tensor> Reshape(const Tensor& x, Shape shape) {
  if (!x.defined()) {
    return absl::InvalidArgumentError("Reshape: the input is undefined");
  }
  TANDEM_ASSIGN_OR_RETURN(Shape target, InferShape(x, std::move(shape)));
  Tensor out = MakeView(x, 0, std::move(target), x.numel());
  RecordOp("Reshape", out, {x},
           [in_shape = x.shape()](const Tensor& g, GradSink& sink) {
             TANDEM_ASSIGN_OR_RETURN(Tensor gx, Reshape(g, in_shape));
             return sink.Add(0, std::move(gx));
           });
  return out;
}

absl::StatusOr<Tensor> Flatten(const Tensor& x, int64_t start_dim,
                               int64_t end_dim) {
  if (!x.defined()) {
    return absl::InvalidArgumentError("Flatten: the input is undefined");
  }
  if (x.ndim() == 0) return Reshape(x, {1});  // as torch.flatten
  TANDEM_ASSIGN_OR_RETURN(int64_t start,
                          internal::NormalizeDim(start_dim, x, "Flatten"));
  TANDEM_ASSIGN_OR_RETURN(int64_t end,
                          internal::NormalizeDim(end_dim, x, "Flatten"));
  if (start > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("Flatten: start_dim ", start_dim, " comes after end_dim ",
                     end_dim, " for ", Describe(x)));
  }
  Shape shape(x.shape().begin(), x.shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  return Reshape(x, std::move(shape));
}

absl::StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  return ::tandem::Reshape(*this, std::move(shape));
}

absl::StatusOr<Tensor> Tensor::View(int64_t offset, Shape shape) const {
  if (!defined()) {
    return absl::InvalidArgumentError("View: the tensor is undefined");
  }
  TANDEM_ASSIGN_OR_RETURN(int64_t n, NumelOf(shape));
  if (offset < 0 || offset > numel() || n > numel() - offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "View: ", n, " elements ", ShapeToString(shape), " at offset ", offset,
        " do not fit in ", Describe(*this), " (", numel(), " elements)"));
  }
  Tensor out = MakeView(*this, offset, std::move(shape), n);
  RecordOp("View", out, {*this},
           [offset, n](const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
             if (g.device().is_cpu()) {  // device kernels check their own
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckFloating(g, "View backward", "grad"));
             }
             if (!buf.accumulate) {
               TANDEM_RETURN_IF_ERROR(FillInPlace(buf.tensor, 0.0));
             }
             TANDEM_ASSIGN_OR_RETURN(Tensor region,
                                     buf.tensor.View(offset, {n}));
             return AddInPlace(region, g);
           });
  return out;
}

}  // namespace tandem
