// Permute: PyTorch's x.permute(dims).contiguous() as one op, defined the
// structured way (docs/adding_an_op.md): one argument check, one autograd
// formula (the gradient is Permute by the inverse permutation), a kernel
// per device (the CPU's here). tandem's tensors are contiguous, so unlike
// torch.permute this is a copy, not a view. GPT's attention uses it to move
// heads next to the batch ([B, T, H, hd] <-> [B, H, T, hd]).
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/permute_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

constexpr char kOp[] = "Permute";

// Walks out's elements in order; the last dim is copied as one run when it
// is x's last dim too (a memcpy), else element by element.
absl::Status CpuPermute(const Tensor& x, const std::vector<int64_t>& dims,
                        const Tensor& out) {
  const int64_t n = x.ndim();
  if (out.numel() == 0) return absl::OkStatus();
  const int64_t esize = DTypeSize(x.dtype());
  std::vector<int64_t> in_stride(static_cast<size_t>(n), 1);
  for (int64_t d = n - 2; d >= 0; --d) {
    in_stride[d] = in_stride[d + 1] * x.dim(d + 1);
  }
  // Stride in x (elements) of each of out's dims.
  std::vector<int64_t> stride(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) stride[k] = in_stride[dims[k]];
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  if (n == 0) {
    std::memcpy(dst, src, static_cast<size_t>(esize));
    return absl::OkStatus();
  }
  const int64_t inner = out.dim(n - 1);
  const int64_t inner_stride = stride[n - 1];
  const int64_t rows = out.numel() / inner;
  std::vector<int64_t> idx(static_cast<size_t>(n), 0);  // out's row index
  int64_t offset = 0;                                   // in x, elements
  for (int64_t r = 0; r < rows; ++r) {
    if (inner_stride == 1) {
      std::memcpy(dst, src + offset * esize,
                  static_cast<size_t>(inner * esize));
    } else {
      for (int64_t i = 0; i < inner; ++i) {
        std::memcpy(dst + i * esize, src + (offset + i * inner_stride) * esize,
                    static_cast<size_t>(esize));
      }
    }
    dst += inner * esize;
    // Next row: the odometer over out's dims 0..n-2.
    for (int64_t d = n - 2; d >= 0; --d) {
      offset += stride[d];
      if (++idx[d] < out.dim(d)) break;
      offset -= stride[d] * out.dim(d);
      idx[d] = 0;
    }
  }
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(PermuteKernels(), DeviceType::kCPU, CpuPermute);

absl::Status CheckDims(const Tensor& x, const std::vector<int64_t>& dims,
                       std::vector<int64_t>& normalised) {
  const int64_t n = x.ndim();
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": dims (", absl::StrJoin(dims, ", "), ") ", why, " for ",
        internal::Describe(x), "; expected a permutation of 0..", n - 1));
  };
  if (static_cast<int64_t>(dims.size()) != n) {
    return bad(absl::StrCat("has ", dims.size(), " entries, not ", n));
  }
  std::vector<bool> seen(static_cast<size_t>(n), false);
  normalised.resize(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k] < 0 ? dims[k] + n : dims[k];
    if (d < 0 || d >= n) return bad(absl::StrCat("has ", dims[k]));
    if (seen[d]) return bad(absl::StrCat("repeats ", dims[k]));
    seen[d] = true;
    normalised[k] = d;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> Permute(const Tensor& x,
                               const std::vector<int64_t>& dims) {
  TANDEM_RETURN_IF_ERROR(internal::CheckDefined(x, kOp, "x"));
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(kOp, x));
  std::vector<int64_t> perm;
  TANDEM_RETURN_IF_ERROR(CheckDims(x, dims, perm));
  TANDEM_ASSIGN_OR_RETURN(PermuteKernel * kernel, PermuteKernels().For(device));
  Shape shape(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) shape[k] = x.dim(perm[k]);
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, perm, out));
  if (ShouldRecord({x})) {
    std::vector<int64_t> inverse(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = k;
    RecordOp(kOp, out, {x},
             [inverse = std::move(inverse)](const Tensor& g,
                                            GradSink& sink) -> absl::Status {
               TANDEM_ASSIGN_OR_RETURN(Tensor gx, Permute(g, inverse));
               return sink.Add(0, std::move(gx));
             });
  }
  return out;
}

}  // namespace tandem
