// tandem::optim::ClipGradNorm — torch.nn.utils.clip_grad_norm_ (PyTorch
// 1.13), and the pieces the sharded forms (train/parallel/sharded/grad_clip.h)
// are built from.
//
//   TANDEM_ASSIGN_OR_RETURN(double norm,
//                           optim::ClipGradNorm(model->Parameters(), 1.0));
//
// The total norm is the p-norm of all gradients taken as one vector
// (p = norm_type; infinity: the largest |g|). Every gradient is then
// multiplied by clip_coef = min(max_norm / (total + 1e-6), 1), as PyTorch
// does (always, also when clip_coef is 1; the coefficient rounded to the
// gradients' dtype; max_norm / x computed as PyTorch's reciprocal(x) *
// max_norm). A non-finite total is returned as it is and, with
// error_if_nonfinite false (1.13's default), applied like PyTorch: an
// infinite total makes clip_coef 0 (finite gradients become 0), a NaN total
// makes every gradient NaN. With error_if_nonfinite the call fails instead
// and nothing changes.
//
// The norm is accumulated in double on the host (sums of |g|^p), not as
// PyTorch's norm of per-parameter f32 norms: equal to PyTorch's within f32
// rounding for f32 gradients, and the same on every rank for the same
// gradients. Gradients on another device are copied to the host to be
// measured and scaled in place where they are.
//
// Under DDP the gradients after Backward are already averaged and equal on
// every rank, so ClipGradNorm over the module's parameters is correct and
// identical on every rank. Under ZeRO and FSDP each rank holds a shard: use
// their ClipGradNorm (one all-reduce of one scalar). Under AMP clip the
// true gradients: GradScaler::Unscale(optimizer), then ClipGradNorm, then
// GradScaler::Step(optimizer) (which does not unscale twice).
//
// Thread-safety: the gradients must not be used by another thread meanwhile.
#ifndef TANDEM_TENSOR_OPTIM_CLIP_GRAD_H_
#define TANDEM_TENSOR_OPTIM_CLIP_GRAD_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::optim {

struct ClipGradNormOptions {
  double norm_type = 2;  // > 0, or infinity
  bool error_if_nonfinite = false;
};

// Clips the gradients of `parameters` (those without a gradient are
// skipped; none: returns 0 and changes nothing) and returns the total norm
// before clipping. InvalidArgument: max_norm negative or not finite,
// norm_type not > 0 (nor infinity), a gradient that is not f32 or f64; with
// error_if_nonfinite, a non-finite total (nothing changed).
absl::StatusOr<double> ClipGradNorm(const std::vector<Tensor>& parameters,
                                    double max_norm,
                                    const ClipGradNormOptions& options = {});

// The gradients of `parameters` that exist.
std::vector<Tensor> GradsOf(const std::vector<Tensor>& parameters);

// The pieces (for norms whose gradients are spread over ranks):
// CheckClipArguments validates max_norm and norm_type as above.
absl::Status CheckClipArguments(double max_norm,
                                const ClipGradNormOptions& options);
// This holder's part of the norm: sum of |g|^p over every element (p
// finite), or max |g| (p infinite; 0 for no elements). Parts combine by sum
// (finite p) or max (infinite p).
absl::StatusOr<double> GradNormPart(const std::vector<Tensor>& grads,
                                    double norm_type);
// The total norm from the combined parts: part^(1/p), or part for infinite p.
double TotalNormFromPart(double part, double norm_type);
// The clip step above: with error_if_nonfinite a non-finite `total` is
// InvalidArgument (nothing changed); else every gradient times clip_coef.
absl::Status ScaleGradsToNorm(const std::vector<Tensor>& grads, double max_norm,
                              double total, const ClipGradNormOptions& options);

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_CLIP_GRAD_H_
