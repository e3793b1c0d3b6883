// Autograd: grad mode, and how ops record their backward.
//
// Users only need NoGradGuard (and Tensor::Backward in tensor/tensor.h):
//
//   {
//     tandem::NoGradGuard no_grad;   // e.g. evaluation, optimizer updates
//     TANDEM_ASSIGN_OR_RETURN(Tensor y, Linear(x, w, b));  // records nothing
//   }
//
// Op implementers (tensor/ops/, or new ops elsewhere) compute the output
// without autograd, then call RecordOp with a backward closure:
//
//   absl::StatusOr<Tensor> Square(const Tensor& x) {
//     TANDEM_ASSIGN_OR_RETURN(Tensor y, ...x*x...);
//     RecordOp("Square", y, {x}, [x = x.Detach()](const Tensor& gy,
//                                                  GradSink& sink) {
//       TANDEM_ASSIGN_OR_RETURN(Tensor gx, ...2*x*gy...);
//       return sink.Add(0, std::move(gx));
//     });
//     return y;
//   }
//
// Contracts for closures:
//   - They run with grad mode off, on the thread that calls Backward.
//   - Capture what they need by value, and capture inputs/outputs through
//     Detach(): capturing the output itself would make a reference cycle
//     (output -> node -> closure -> output) and leak the graph.
//   - For each input i with sink.needs(i), deliver the gradient either with
//     sink.Add(i, g) or by writing into sink.GetBuffer(i). Finish writing one
//     buffer before asking for the next (an input may appear twice).
//   - Return a non-OK Status to abort Backward with that error.
//
// Thread-safety: grad mode is thread-local (each simulated rank is a thread).
// Backward keeps all its bookkeeping on the caller's stack; concurrent
// Backward calls on different graphs are safe.
#ifndef TANDEM_TENSOR_AUTOGRAD_AUTOGRAD_H_
#define TANDEM_TENSOR_AUTOGRAD_AUTOGRAD_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem {

// Whether ops on this thread record autograd nodes. On by default.
bool IsGradEnabled();

// Turns grad mode off on this thread for its lifetime, restoring the
// previous mode afterwards (nests). Like torch.no_grad().
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns grad mode on on this thread for its lifetime, restoring the previous
// mode afterwards (nests). Like torch.enable_grad(): backward closures that
// recompute a forward (activation checkpointing) use it, since closures run
// with grad mode off.
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

namespace internal {
struct BackwardState;
}  // namespace internal
struct Node;

// A node's view of where its inputs' gradients go during Backward.
class GradSink {
 public:
  // Whether input i requires a gradient; closures skip work for others.
  bool needs(int i) const;

  // Adds `g` (input i's shape and dtype, same device) to input i's
  // gradient. When nothing was accumulated yet and `g` is uniquely owned it
  // is adopted without a copy. A no-op when !needs(i).
  absl::Status Add(int i, Tensor g);

  // A buffer with input i's shape and dtype for writing the contribution in
  // place. When `accumulate` is true it already holds earlier contributions
  // (e.g. a leaf's existing grad, maybe a view into a DDP bucket): ADD to it
  // (gemm beta = 1). Otherwise it is uninitialised: OVERWRITE it (beta = 0).
  // FailedPrecondition when !needs(i).
  struct Buffer {
    Tensor tensor;
    bool accumulate = false;
  };
  absl::StatusOr<Buffer> GetBuffer(int i);

  // Internal: constructed by the backward engine.
  GradSink(internal::BackwardState* state, Node* node)
      : state_(state), node_(node) {}

 private:
  internal::BackwardState* state_;
  Node* node_;
};

using BackwardFn =
    std::function<absl::Status(const Tensor& grad_output, GradSink& sink)>;

// One recorded op. Internal to tensor/; exposed for GradSink.
struct Node {
  std::string name;
  // Creation order (process-wide, atomic); Backward runs ready nodes
  // newest first, as PyTorch's engine does.
  uint64_t sequence_nr = 0;
  // inputs[i] is undefined when input i doesn't require grad.
  std::vector<Tensor> inputs;
  BackwardFn backward;  // reset after running unless retain_graph
  bool released = false;
  // The module whose forward recorded this op ("Linear[0]"), set only while
  // the timeline records (base/trace): its backward shows under that name.
  std::string module;
};

// While it lives, ops recorded on this thread are attributed to module
// `label` (Node::module) for the timeline; nests (the innermost wins). Only
// containers create it, and only while base/trace records.
class ScopedModuleLabel {
 public:
  explicit ScopedModuleLabel(std::string label);
  ~ScopedModuleLabel();
  ScopedModuleLabel(const ScopedModuleLabel&) = delete;
  ScopedModuleLabel& operator=(const ScopedModuleLabel&) = delete;

 private:
  std::string label_;
  const std::string* previous_;
};

// True when grad mode is on and some input requires grad, i.e. when
// RecordOp would record. Ops use it to skip saving tensors.
bool ShouldRecord(std::initializer_list<Tensor> inputs);
bool ShouldRecord(const std::vector<Tensor>& inputs);

// Makes `output` (freshly produced by op `name` from `inputs`) a non-leaf
// that requires grad, with `backward` as its gradient function — when
// ShouldRecord(inputs); otherwise does nothing. `output` must not already
// have a grad_fn.
void RecordOp(std::string_view name, const Tensor& output,
              std::vector<Tensor> inputs, BackwardFn backward);

}  // namespace tandem

#endif  // TANDEM_TENSOR_AUTOGRAD_AUTOGRAD_H_
