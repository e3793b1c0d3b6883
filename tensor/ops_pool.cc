// MaxPool2d (NCHW, no padding, floor mode): its argument check and its CPU
// kernel. Forward records the winning
// input position of every window; backward scatters the gradient there.
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd.h"
#include "tensor/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops_internal.h"

namespace tandem {

using internal::Describe;
using internal::DispatchFloat;

namespace {

// options.stride is resolved and the window fits (checked by MaxPool2d).
absl::StatusOr<Tensor> CpuMaxPool2d(const Tensor& x,
                                    const MaxPool2dOptions& options) {
  const auto [kh, kw] = options.kernel;
  const auto [sh, sw] = options.stride;
  const int64_t h = x.dim(2), w = x.dim(3);
  const int64_t oh = (h - kh) / sh + 1, ow = (w - kw) / sw + 1;
  const int64_t planes = x.dim(0) * x.dim(1);
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, internal::NewLike({x.dim(0), x.dim(1), oh, ow}, x.dtype()));
  // Index within its H*W plane of each output's maximum.
  TANDEM_ASSIGN_OR_RETURN(Tensor argmax,
                          internal::NewLike(y.shape(), DType::kI64));
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    int64_t* pi = argmax.data<int64_t>();
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = px + p * h * w;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          int64_t best = i * sh * w + j * sw;
          for (int64_t a = 0; a < kh; ++a) {
            for (int64_t b = 0; b < kw; ++b) {
              const int64_t idx = (i * sh + a) * w + (j * sw + b);
              // The first maximum wins; NaN propagates like PyTorch.
              if (!std::isnan(plane[best]) &&
                  (std::isnan(plane[idx]) || plane[idx] > plane[best])) {
                best = idx;
              }
            }
          }
          const int64_t o = (p * oh + i) * ow + j;
          py[o] = plane[best];
          pi[o] = best;
        }
      }
    }
  });
  RecordOp("MaxPool2d", y, {x},
           [argmax, planes, plane_in = h * w, plane_out = oh * ow](
               const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
             if (!buf.accumulate) {
               TANDEM_RETURN_IF_ERROR(FillInPlace(buf.tensor, 0.0));
             }
             DispatchFloat(g.dtype(), [&](auto zero) {
               using T = decltype(zero);
               const T* pg = g.data<T>();
               const int64_t* pi = argmax.data<int64_t>();
               T* px = buf.tensor.data<T>();
               for (int64_t p = 0; p < planes; ++p) {
                 for (int64_t o = 0; o < plane_out; ++o) {
                   const int64_t k = p * plane_out + o;
                   px[p * plane_in + pi[k]] += pg[k];
                 }
               }
             });
             return absl::OkStatus();
           });
  return y;
}
TANDEM_REGISTER_KERNEL(MaxPool2dKernels(), DeviceType::kCPU, CpuMaxPool2d);

}  // namespace

absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                 const MaxPool2dOptions& options) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kMaxPool2d, {x}, [&](const std::vector<Tensor>& in) {
            return MaxPool2d(in[0], options);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("MaxPool2d", x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, "MaxPool2d", "x"));
  if (x.ndim() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("MaxPool2d: x must be [N, C, H, W], got ", Describe(x)));
  }
  MaxPool2dOptions resolved = options;
  const auto [kh, kw] = options.kernel;
  if (resolved.stride[0] == 0) resolved.stride[0] = kh;
  if (resolved.stride[1] == 0) resolved.stride[1] = kw;
  const auto [sh, sw] = resolved.stride;
  const int64_t h = x.dim(2), w = x.dim(3);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || h < kh || w < kw) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MaxPool2d: kernel (", kh, ", ", kw, ") with stride (", sh, ", ", sw,
        ") does not fit x ", Describe(x),
        "; kernel and stride must be >= 1 and the kernel no larger than "
        "the input"));
  }
  TANDEM_ASSIGN_OR_RETURN(MaxPool2dKernel * kernel,
                          MaxPool2dKernels().For(device));
  return kernel(x, resolved);
}

}  // namespace tandem
