// ScaledDotProductAttention, defined the structured way
// (docs/adding_an_op.md): one argument check, one autograd formula (the
// gradient is the op's backward row), a kernel per device: the CPU's here,
// CUDA's in tensor/cuda/ops/attention.cc. Values follow PyTorch's math
// (nanoGPT's non-flash path): att = (q @ k^T) * scale, masked_fill(-inf)
// above the diagonal, softmax, dropout, att @ v.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/avx2/attention_avx2.h"
#include "tensor/dispatch/attention_kernels.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/ops/dropout_mask.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

// The portable CPU kernels: one (batch, head) at a time, rows of T;
// products summed in double and rounded once to T. f32 on a CPU with AVX2
// and FMA takes tensor/cpu/avx2/attention_avx2.h's kernels instead (f32 GEMMs
// over causal row blocks, PyTorch's bmm arithmetic); these remain for f64 and
// other CPUs, and are the reference its tests compare with.
template <typename T>
void CpuForward(const T* q, const T* k, const T* v, const T* mask, int64_t bh,
                int64_t t, int64_t hd, bool causal, double scale, T* probs,
                T* y) {
  const T scale_t = static_cast<T>(scale);
  std::vector<double> e(static_cast<size_t>(t));
  for (int64_t h = 0; h < bh; ++h) {
    const T* qh = q + h * t * hd;
    const T* kh = k + h * t * hd;
    const T* vh = v + h * t * hd;
    for (int64_t i = 0; i < t; ++i) {
      const int64_t jn = causal ? i + 1 : t;
      T* p = probs + (h * t + i) * t;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < jn; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) {
          dot += static_cast<double>(qh[i * hd + d]) * kh[j * hd + d];
        }
        // (q @ k^T) rounded to T, then times the scale in T, as PyTorch.
        const T s = static_cast<T>(dot) * scale_t;
        e[j] = s;
        mx = std::max(mx, e[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < jn; ++j) {
        e[j] = std::exp(e[j] - mx);
        sum += e[j];
      }
      for (int64_t j = 0; j < t; ++j) {
        p[j] = j < jn ? static_cast<T>(e[j] / sum) : T(0);
      }
      const T* m = mask != nullptr ? mask + (h * t + i) * t : nullptr;
      T* yi = y + (h * t + i) * hd;
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < jn; ++j) {
          const double a =
              m != nullptr ? static_cast<double>(p[j] * m[j]) : p[j];
          acc += a * vh[j * hd + d];
        }
        yi[d] = static_cast<T>(acc);
      }
    }
  }
}

template <typename T>
void CpuBackward(const T* gy, const T* q, const T* k, const T* v,
                 const T* probs, const T* mask, int64_t bh, int64_t t,
                 int64_t hd, bool causal, double scale, T* gq, T* gk, T* gv) {
  std::vector<double> ds(static_cast<size_t>(t));
  std::vector<double> gk_acc(static_cast<size_t>(t * hd));
  std::vector<double> gv_acc(static_cast<size_t>(t * hd));
  for (int64_t h = 0; h < bh; ++h) {
    const int64_t off = h * t * hd;
    std::fill(gk_acc.begin(), gk_acc.end(), 0.0);
    std::fill(gv_acc.begin(), gv_acc.end(), 0.0);
    for (int64_t i = 0; i < t; ++i) {
      const int64_t jn = causal ? i + 1 : t;
      const T* p = probs + (h * t + i) * t;
      const T* m = mask != nullptr ? mask + (h * t + i) * t : nullptr;
      const T* gyi = gy + off + i * hd;
      // dP[j] = (gy_i . v_j) * mask; r = sum_j P dP.
      double r = 0;
      for (int64_t j = 0; j < jn; ++j) {
        double da = 0;
        for (int64_t d = 0; d < hd; ++d) {
          da += static_cast<double>(gyi[d]) * v[off + j * hd + d];
        }
        ds[j] = m != nullptr ? da * static_cast<double>(m[j]) : da;
        r += static_cast<double>(p[j]) * ds[j];
      }
      for (int64_t j = 0; j < jn; ++j) {
        ds[j] = static_cast<double>(p[j]) * (ds[j] - r) * scale;
        const double a = m != nullptr ? static_cast<double>(p[j] * m[j]) : p[j];
        for (int64_t d = 0; d < hd; ++d) {
          gk_acc[j * hd + d] += ds[j] * q[off + i * hd + d];
          gv_acc[j * hd + d] += a * gyi[d];
        }
      }
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < jn; ++j) acc += ds[j] * k[off + j * hd + d];
        gq[off + i * hd + d] = static_cast<T>(acc);
      }
    }
    for (int64_t j = 0; j < t * hd; ++j) {
      gk[off + j] = static_cast<T>(gk_acc[j]);
      gv[off + j] = static_cast<T>(gv_acc[j]);
    }
  }
}

template <typename T>
const T* OrNull(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

absl::Status CpuAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& mask, bool causal, double scale,
                          const Tensor& probs, const Tensor& y) {
  if (q.dtype() == DType::kF32 && internal::AttentionAvx2Usable(q.dim(3))) {
    return internal::AttentionForwardAvx2(
        q.data<float>(), k.data<float>(), v.data<float>(), OrNull<float>(mask),
        q.dim(0) * q.dim(1), q.dim(2), q.dim(3), causal, scale,
        probs.data<float>(), y.data<float>());
  }
  internal::DispatchFloat(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    CpuForward(q.data<T>(), k.data<T>(), v.data<T>(), OrNull<T>(mask),
               q.dim(0) * q.dim(1), q.dim(2), q.dim(3), causal, scale,
               probs.data<T>(), y.data<T>());
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AttentionForwardKernels(), DeviceType::kCPU,
                       CpuAttention);

absl::Status CpuAttentionBackward(const Tensor& gy, const Tensor& q,
                                  const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const Tensor& mask,
                                  bool causal, double scale, const Tensor& gq,
                                  const Tensor& gk, const Tensor& gv) {
  if (q.dtype() == DType::kF32 && internal::AttentionAvx2Usable(q.dim(3))) {
    return internal::AttentionBackwardAvx2(
        gy.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(),
        probs.data<float>(), OrNull<float>(mask), q.dim(0) * q.dim(1), q.dim(2),
        q.dim(3), causal, scale, gq.data<float>(), gk.data<float>(),
        gv.data<float>());
  }
  internal::DispatchFloat(q.dtype(), [&](auto zero) {
    using T = decltype(zero);
    CpuBackward(gy.data<T>(), q.data<T>(), k.data<T>(), v.data<T>(),
                probs.data<T>(), OrNull<T>(mask), q.dim(0) * q.dim(1), q.dim(2),
                q.dim(3), causal, scale, gq.data<T>(), gk.data<T>(),
                gv.data<T>());
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AttentionBackwardKernels(), DeviceType::kCPU,
                       CpuAttentionBackward);

constexpr char kOp[] = "ScaledDotProductAttention";

absl::Status CheckAttentionArgs(const Tensor& q, const Tensor& k,
                                const Tensor& v, double dropout_p,
                                const Generator* gen) {
  for (const auto& [t, name] :
       {std::pair<const Tensor&, const char*>{q, "q"}, {k, "k"}, {v, "v"}}) {
    TANDEM_RETURN_IF_ERROR(internal::CheckFloat(t, kOp, name));
  }
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(q, k, kOp));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(q, v, kOp));
  if (q.ndim() != 4 || k.shape() != q.shape() || v.shape() != q.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": q, k and v must all be [B, H, T, head_dim], got q ",
        internal::Describe(q), ", k ", internal::Describe(k), ", v ",
        internal::Describe(v)));
  }
  return internal::CheckAttentionDropout(kOp, dropout_p, gen);
}

}  // namespace

absl::StatusOr<Tensor> ScaledDotProductAttention(const Tensor& q,
                                                 const Tensor& k,
                                                 const Tensor& v, bool causal,
                                                 double dropout_p,
                                                 Generator* gen) {
  // f16/bf16 (and autocast): computed in f32, rounded back.
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kSoftmax, {q, k, v}, [&](const std::vector<Tensor>& in) {
            return ScaledDotProductAttention(in[0], in[1], in[2], causal,
                                             dropout_p, gen);
          })) {
    return *std::move(routed);
  }
  // The one argument check, for every device.
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice(kOp, q, k, v));
  TANDEM_RETURN_IF_ERROR(CheckAttentionArgs(q, k, v, dropout_p, gen));
  TANDEM_ASSIGN_OR_RETURN(AttentionForwardKernel * kernel,
                          AttentionForwardKernels().For(device));
  const int64_t t = q.dim(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.dim(3)));
  const Shape att_shape = {q.dim(0), q.dim(1), t, t};
  Tensor mask;
  if (dropout_p > 0 && q.numel() > 0) {
    TANDEM_ASSIGN_OR_RETURN(
        mask, internal::DropoutMask(att_shape, q.dtype(), dropout_p, *gen));
    if (!device.is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(mask, mask.To(device));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor probs,
                          Tensor::Empty(att_shape, q.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(q.shape(), q.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(q, k, v, mask, causal, scale, probs, y));
  // The one backward formula: the backward row, a kernel per device.
  if (ShouldRecord({q, k, v})) {
    RecordOp(
        kOp, y, {q, k, v},
        [sq = q.Detach(), sk = k.Detach(), sv = v.Detach(), probs, mask, causal,
         scale](const Tensor& g, GradSink& sink) -> absl::Status {
          const Device device = sq.device();
          TANDEM_ASSIGN_OR_RETURN(
              const Device gd,
              internal::OpDevice("ScaledDotProductAttentionBackward", g, sq));
          (void)gd;
          TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(
              g, sq, "ScaledDotProductAttentionBackward"));
          TANDEM_ASSIGN_OR_RETURN(AttentionBackwardKernel * backward,
                                  AttentionBackwardKernels().For(device));
          std::vector<Tensor> grads;
          for (int i = 0; i < 3; ++i) {
            TANDEM_ASSIGN_OR_RETURN(
                Tensor gi, Tensor::Empty(sq.shape(), sq.dtype(), device));
            grads.push_back(std::move(gi));
          }
          TANDEM_RETURN_IF_ERROR(backward(g, sq, sk, sv, probs, mask, causal,
                                          scale, grads[0], grads[1], grads[2]));
          for (int i = 0; i < 3; ++i) {
            TANDEM_RETURN_IF_ERROR(sink.Add(i, std::move(grads[i])));
          }
          return absl::OkStatus();
        });
  }
  return y;
}

}  // namespace tandem
