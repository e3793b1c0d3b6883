// Prints tandem's outputs and gradients under bf16 autocast for Linear,
// Conv2d and a small MLP, on inputs every side can recompute (v(i, k) =
// sin(0.37 i + k) * scale), one line per tensor: "name v0 v1 ...".
// bench/peers/amp_fidelity.py runs the same under PyTorch 1.13's
// torch.autocast("cpu", dtype=torch.bfloat16) and reports the distance in
// bf16 ulps (tensor/amp/amp_fidelity_test.sh runs both).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "tensor/amp/autocast.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

absl::StatusOr<Tensor> Input(Shape shape, int k, float scale, bool grad) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>(std::sin(0.37 * i + k) * scale);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector<float>(v, shape));
  if (grad) TANDEM_RETURN_IF_ERROR(t.set_requires_grad(true));
  return t;
}

absl::Status Print(const std::string& name, const Tensor& t) {
  TANDEM_ASSIGN_OR_RETURN(Tensor f, t.To(DType::kF32));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, f.ToVector<float>());
  std::printf("%s", name.c_str());
  for (float x : v) std::printf(" %.9g", x);
  std::printf("\n");
  return absl::OkStatus();
}

absl::Status Run() {
  {  // Linear(16, 12) on x [8, 16]; loss = mse(y, target).
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Input({8, 16}, 1, 1.0f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor w, Input({12, 16}, 2, 0.25f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor b, Input({12}, 3, 0.1f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Input({8, 12}, 4, 1.0f, false));
    Tensor y, loss;
    {
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
      TANDEM_ASSIGN_OR_RETURN(y, Linear(x, w, b));
      TANDEM_ASSIGN_OR_RETURN(loss, Mse(y, t));
    }
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_RETURN_IF_ERROR(Print("linear.y", y));
    TANDEM_RETURN_IF_ERROR(Print("linear.loss", loss));
    TANDEM_RETURN_IF_ERROR(Print("linear.dx", x.grad()));
    TANDEM_RETURN_IF_ERROR(Print("linear.dw", w.grad()));
    TANDEM_RETURN_IF_ERROR(Print("linear.db", b.grad()));
  }
  {  // Conv2d(3, 4, 3, padding 1) on x [2, 3, 6, 6].
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Input({2, 3, 6, 6}, 5, 1.0f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor w, Input({4, 3, 3, 3}, 6, 0.3f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor b, Input({4}, 7, 0.1f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Input({2, 4, 6, 6}, 8, 1.0f, false));
    Tensor y, loss;
    {
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
      TANDEM_ASSIGN_OR_RETURN(y, Conv2d(x, w, b, {.padding = {1, 1}}));
      TANDEM_ASSIGN_OR_RETURN(loss, Mse(y, t));
    }
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_RETURN_IF_ERROR(Print("conv.y", y));
    TANDEM_RETURN_IF_ERROR(Print("conv.loss", loss));
    TANDEM_RETURN_IF_ERROR(Print("conv.dx", x.grad()));
    TANDEM_RETURN_IF_ERROR(Print("conv.dw", w.grad()));
    TANDEM_RETURN_IF_ERROR(Print("conv.db", b.grad()));
  }
  {  // MLP 16-32-10 with ReLU, cross-entropy on labels i % 10.
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Input({8, 16}, 9, 1.0f, false));
    TANDEM_ASSIGN_OR_RETURN(Tensor w1, Input({32, 16}, 10, 0.25f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor b1, Input({32}, 11, 0.1f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor w2, Input({10, 32}, 12, 0.18f, true));
    TANDEM_ASSIGN_OR_RETURN(Tensor b2, Input({10}, 13, 0.1f, true));
    std::vector<int64_t> labels(8);
    for (int64_t i = 0; i < 8; ++i) labels[i] = i % 10;
    TANDEM_ASSIGN_OR_RETURN(Tensor l, Tensor::FromVector<int64_t>(labels, {8}));
    Tensor logits, loss;
    {
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
      TANDEM_ASSIGN_OR_RETURN(Tensor h, Linear(x, w1, b1));
      TANDEM_ASSIGN_OR_RETURN(h, Relu(h));
      TANDEM_ASSIGN_OR_RETURN(logits, Linear(h, w2, b2));
      TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, l));
    }
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_RETURN_IF_ERROR(Print("mlp.logits", logits));
    TANDEM_RETURN_IF_ERROR(Print("mlp.loss", loss));
    TANDEM_RETURN_IF_ERROR(Print("mlp.dw1", w1.grad()));
    TANDEM_RETURN_IF_ERROR(Print("mlp.db1", b1.grad()));
    TANDEM_RETURN_IF_ERROR(Print("mlp.dw2", w2.grad()));
    TANDEM_RETURN_IF_ERROR(Print("mlp.db2", b2.grad()));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem

int main() {
  absl::Status s = tandem::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "amp_fidelity_dump: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
