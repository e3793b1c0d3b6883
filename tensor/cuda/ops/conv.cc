// CUDA ops: Conv2d (im2col + cuBLAS; a 1x1, stride-1, unpadded convolution
// uses the image itself as the column matrix), NCHW.
//
// Images are processed in chunks whose column matrices fit a fixed scratch
// budget: one im2col kernel and one strided-batched GEMM per chunk for the
// forward pass and for dx (then a gathering col2im); dW is one GEMM per
// image accumulating into the same buffer (beta = 1), in image order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/gemm.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

namespace tandem::cuda::internal {
namespace {

// Column-matrix elements per chunk (64 MiB of f32).
constexpr int64_t kColumnBudget = int64_t{1} << 24;

bool IsPointwise(const kernels::ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 &&
         g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

int64_t Rows(const kernels::ConvGeometry& g) {
  return g.channels * g.kernel_h * g.kernel_w;
}
int64_t Cols(const kernels::ConvGeometry& g) { return g.out_h * g.out_w; }

// Images per chunk, and the scratch for that many column matrices
// (undefined when pointwise: the images are the columns).
struct Chunking {
  int64_t images = 1;
  Tensor columns;
};

absl::StatusOr<Chunking> MakeChunking(const kernels::ConvGeometry& geo,
                                      int64_t batch, DType dtype,
                                      Device device) {
  Chunking c;
  if (IsPointwise(geo)) {
    c.images = std::max<int64_t>(batch, 1);
    return c;
  }
  const int64_t per_image = std::max<int64_t>(Rows(geo) * Cols(geo), 1);
  c.images = std::clamp<int64_t>(kColumnBudget / per_image, 1,
                                 std::max<int64_t>(batch, 1));
  TANDEM_ASSIGN_OR_RETURN(c.columns,
                          Tensor::Empty({c.images * per_image}, dtype, device));
  return c;
}

// The geometry of the convolution the definition checked.
kernels::ConvGeometry GeometryOf(const Tensor& x, const Tensor& weight,
                                 const Conv2dOptions& options) {
  const auto [sh, sw] = options.stride;
  const auto [ph, pw] = options.padding;
  kernels::ConvGeometry geo;
  geo.channels = x.dim(1);
  geo.height = x.dim(2);
  geo.width = x.dim(3);
  geo.kernel_h = weight.dim(2);
  geo.kernel_w = weight.dim(3);
  geo.stride_h = sh;
  geo.stride_w = sw;
  geo.pad_h = ph;
  geo.pad_w = pw;
  geo.out_h = (geo.height + 2 * ph - geo.kernel_h) / sh + 1;
  geo.out_w = (geo.width + 2 * pw - geo.kernel_w) / sw + 1;
  return geo;
}

// The kernels of tensor/dispatch/op_kernels.h, on arguments their op checked.
absl::Status CudaConv2dBackward(const Tensor& g, const Tensor& x,
                                const Tensor& w, const Conv2dOptions& options,
                                const GradOut& dx, const GradOut& dw,
                                const GradOut& db) {
  const kernels::ConvGeometry geo = GeometryOf(x, w, options);
  const int64_t batch = x.dim(0), out_channels = w.dim(0);
  const Device device = x.device();
  const int d = device.index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  const DType dtype = g.dtype();
  const int64_t rows = Rows(geo), cols = Cols(geo);
  const int64_t in_plane = geo.channels * geo.height * geo.width;
  const int64_t out_plane = out_channels * cols;
  const bool pointwise = IsPointwise(geo);
  Chunking chunks;  // column scratch, only when dW or dx needs it
  if (dx.tensor.defined() || dw.tensor.defined()) {
    TANDEM_ASSIGN_OR_RETURN(chunks, MakeChunking(geo, batch, dtype, device));
  }

  if (dw.tensor.defined()) {  // dW [O, rows] = sum_n g_n [O, cols] · col_n^T
    if (!dw.accumulate && batch == 0) {
      TANDEM_RETURN_IF_ERROR(::tandem::FillInPlace(dw.tensor, 0.0));
    }
    for (int64_t n0 = 0; n0 < batch; n0 += chunks.images) {
      const int64_t nb = std::min(chunks.images, batch - n0);
      if (!pointwise) {
        TANDEM_CUDA_RETURN_IF_ERROR(
            kernels::Im2Col(dtype, geo, ElementPtr(x, n0 * in_plane), nb,
                            chunks.columns.raw_data(), stream));
      }
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t n = n0 + j;
        const void* col = pointwise
                              ? ElementPtr(x, n * in_plane)
                              : ElementPtr(chunks.columns, j * rows * cols);
        const double beta = (n == 0 && !dw.accumulate) ? 0.0 : 1.0;
        TANDEM_RETURN_IF_ERROR(Gemm(
            d, stream, dtype, false, true, out_channels, rows, cols, 1.0,
            ElementPtr(g, n * out_plane), col, beta, dw.tensor.raw_data()));
      }
    }
  }
  if (db.tensor.defined()) {  // db [O] = sum over n, h, w of g
    TANDEM_CUDA_RETURN_IF_ERROR(
        kernels::SumOuterInner(dtype, g.raw_data(), batch, out_channels, cols,
                               db.tensor.raw_data(), db.accumulate, stream));
  }
  if (dx.tensor.defined()) {  // dx_n = col2im(W^T [rows, O] · g_n [O, cols])
    if (pointwise) {
      TANDEM_RETURN_IF_ERROR(GemmStridedBatched(
          d, stream, dtype, true, false, rows, cols, out_channels, 1.0,
          w.raw_data(), 0, g.raw_data(), out_plane, dx.accumulate ? 1.0 : 0.0,
          dx.tensor.raw_data(), in_plane, batch));
    } else {
      for (int64_t n0 = 0; n0 < batch; n0 += chunks.images) {
        const int64_t nb = std::min(chunks.images, batch - n0);
        TANDEM_RETURN_IF_ERROR(GemmStridedBatched(
            d, stream, dtype, true, false, rows, cols, out_channels, 1.0,
            w.raw_data(), 0, ElementPtr(g, n0 * out_plane), out_plane, 0.0,
            chunks.columns.raw_data(), rows * cols, nb));
        TANDEM_CUDA_RETURN_IF_ERROR(kernels::Col2Im(
            dtype, geo, chunks.columns.raw_data(), nb,
            ElementPtr(dx.tensor, n0 * in_plane), dx.accumulate, stream));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CudaConv2d(const Tensor& x, const Tensor& weight,
                        const Tensor& bias, const Conv2dOptions& options,
                        const Tensor& y) {
  const Device device = x.device();
  const int64_t batch = x.dim(0), out_channels = weight.dim(0);
  const kernels::ConvGeometry geo = GeometryOf(x, weight, options);
  const int64_t rows = Rows(geo), cols = Cols(geo);
  const int64_t in_plane = geo.channels * geo.height * geo.width;
  const int64_t out_plane = out_channels * cols;
  const DType dtype = x.dtype();
  const int d = device.index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  if (bias.defined()) {
    TANDEM_CUDA_RETURN_IF_ERROR(
        kernels::BroadcastMiddle(dtype, bias.raw_data(), batch, out_channels,
                                 cols, y.raw_data(), stream));
  }
  TANDEM_ASSIGN_OR_RETURN(Chunking chunks,
                          MakeChunking(geo, batch, dtype, device));
  const bool pointwise = IsPointwise(geo);
  for (int64_t n0 = 0; n0 < batch; n0 += chunks.images) {
    const int64_t nb = std::min(chunks.images, batch - n0);
    const void* col = ElementPtr(x, n0 * in_plane);
    if (!pointwise) {
      TANDEM_CUDA_RETURN_IF_ERROR(kernels::Im2Col(
          dtype, geo, col, nb, chunks.columns.raw_data(), stream));
      col = chunks.columns.raw_data();
    }
    // y_n [O, cols] (+)= W [O, rows] · col_n [rows, cols]
    TANDEM_RETURN_IF_ERROR(GemmStridedBatched(
        d, stream, dtype, false, false, out_channels, cols, rows, 1.0,
        weight.raw_data(), 0, col, pointwise ? in_plane : rows * cols,
        bias.defined() ? 1.0 : 0.0, ElementPtr(y, n0 * out_plane), out_plane,
        nb));
  }
  return absl::OkStatus();
}

TANDEM_REGISTER_KERNEL(Conv2dKernels(), DeviceType::kCUDA, CudaConv2d);
TANDEM_REGISTER_KERNEL(Conv2dBackwardKernels(), DeviceType::kCUDA,
                       CudaConv2dBackward);

}  // namespace
}  // namespace tandem::cuda::internal
