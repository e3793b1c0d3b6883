// Embedding, defined the structured way (docs/adding_an_op.md): one
// argument check (including the index range, read on the host), one
// autograd formula (the gradient is the op EmbeddingBackward), and a kernel
// per device in the kernel table: the CPU's here, CUDA's in
// tensor/cuda/ops/embedding.cc. Values follow PyTorch's
// torch.nn.functional.embedding(indices, weight) with a dense gradient.
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

// The rows. Forward: out [n, D], inputs {indices (n elements, i64/i32),
// weight [V, D]}. Backward: out [V, D] zero-filled by the definition,
// inputs {g [n, D], indices}; the kernel adds row i of g into row
// indices[i] of out for i = 0, 1, ..., n - 1 in that order. attr unused.

int64_t IndexAt(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::kI64 ? indices.data<int64_t>()[i]
                                        : indices.data<int32_t>()[i];
}

absl::Status CpuEmbedding(const Tensor& out, absl::Span<const Tensor> in,
                          double /*attr*/) {
  const Tensor& indices = in[0];
  const Tensor& weight = in[1];
  const int64_t n = indices.numel();
  const int64_t row_bytes = weight.dim(1) * DTypeSize(weight.dtype());
  const char* w = static_cast<const char*>(weight.raw_data());
  char* y = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(y + i * row_bytes, w + IndexAt(indices, i) * row_bytes,
                static_cast<size_t>(row_bytes));
  }
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(EmbeddingKernels(), DeviceType::kCPU, CpuEmbedding);

absl::Status CpuEmbeddingBackward(const Tensor& out,
                                  absl::Span<const Tensor> in,
                                  double /*attr*/) {
  const Tensor& g = in[0];
  const Tensor& indices = in[1];
  const int64_t n = indices.numel(), d = out.dim(1);
  internal::DispatchFloat(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pg = g.data<T>();
    T* gw = out.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      T* row = gw + IndexAt(indices, i) * d;
      const T* src = pg + i * d;
      for (int64_t k = 0; k < d; ++k) row[k] += src[k];
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(EmbeddingBackwardKernels(), DeviceType::kCPU,
                       CpuEmbeddingBackward);

// "[1, 2]": the multi-dimensional position of flat element `flat`.
std::string Position(const Shape& shape, int64_t flat) {
  std::vector<int64_t> pos(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    pos[k] = flat % shape[k];
    flat /= shape[k];
  }
  return absl::StrCat("[", absl::StrJoin(pos, ", "), "]");
}

// Every index in [0, V), read on the host; the one message for every device.
absl::Status CheckIndices(const Tensor& indices, int64_t v) {
  Tensor host = indices;
  if (!indices.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(host, indices.To(Device::CPU()));
  }
  const int64_t n = host.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = IndexAt(host, i);
    if (idx < 0 || idx >= v) {
      return absl::InvalidArgumentError(
          absl::StrCat("Embedding: index out of range in self: indices",
                       Position(host.shape(), i), " = ", idx, " is not in [0, ",
                       v, ") (weight has ", v,
                       " rows); every index must name a row of the weight"));
    }
  }
  return absl::OkStatus();
}

// gw = zeros [V, D] with the rows of g added at the indices; not recorded.
absl::StatusOr<Tensor> EmbeddingBackward(const Tensor& g, const Tensor& indices,
                                         const Shape& weight_shape) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("EmbeddingBackward", g, indices));
  TANDEM_ASSIGN_OR_RETURN(PointwiseKernel * kernel,
                          EmbeddingBackwardKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor gw,
                          Tensor::Zeros(weight_shape, g.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(gw, {g, indices}, 0));
  return gw;
}

}  // namespace

absl::StatusOr<Tensor> Embedding(const Tensor& indices, const Tensor& weight) {
  // f16/bf16 weights: gathered through f32 (exact), the gradient rounded
  // back, as the other ops route them.
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {indices, weight}, [&](const std::vector<Tensor>& in) {
            return Embedding(in[0], in[1]);
          })) {
    return *std::move(routed);
  }
  // The one argument check, for every device.
  TANDEM_RETURN_IF_ERROR(
      internal::CheckDefined(indices, "Embedding", "indices"));
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Embedding", indices, weight));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(weight, "Embedding", "weight"));
  if (indices.dtype() != DType::kI64 && indices.dtype() != DType::kI32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Embedding: indices must be i64 or i32 (PyTorch's Long or Int), got ",
        internal::Describe(indices), "; convert with To(DType::kI64)"));
  }
  if (weight.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("Embedding: weight must be [num_embeddings, "
                     "embedding_dim], got ",
                     internal::Describe(weight)));
  }
  TANDEM_RETURN_IF_ERROR(CheckIndices(indices, weight.dim(0)));
  TANDEM_ASSIGN_OR_RETURN(PointwiseKernel * kernel,
                          EmbeddingKernels().For(device));
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.dim(1));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(out_shape, weight.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(y, {indices, weight}, 0));
  // The one backward formula: gw = EmbeddingBackward(g, indices), an op
  // with a kernel per device.
  if (ShouldRecord({weight})) {
    RecordOp("Embedding", y, {weight},
             [si = indices.Detach(), shape = weight.shape()](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_ASSIGN_OR_RETURN(Tensor gw,
                                       EmbeddingBackward(g, si, shape));
               return sink.Add(0, std::move(gw));
             });
  }
  return y;
}

}  // namespace tandem
