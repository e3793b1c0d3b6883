// ReplicateInto: PyTorch's Broadcast for one parameter of a module replica
// (torch.nn.parallel.replicate), the piece of DataParallel that must reach
// into a tensor's autograd state.
//
//   // Every forward, for each parameter p of the original module and the
//   // matching parameter r of the replica on device k:
//   TANDEM_RETURN_IF_ERROR(ReplicateInto(p, r));
//   // r now holds p's values on r's device; backward through r adds r's
//   // gradient (copied to p's device) onto p's gradient.
//
// The replica's tensor keeps its identity (its TensorImpl: the replica
// module and its layers hold handles to it); only the memory behind it and
// its autograd state change. With grad mode on and `source` requiring grad
// it becomes a non-leaf whose grad_fn ("Broadcast") copies the incoming
// gradient to source's device and accumulates it there, so gradients of
// several replicas are summed onto the source (reduce-add) in the order the
// backward engine reaches them: deterministic when every ReplicateInto call
// precedes, on one thread, the ops that use the replicas. Otherwise it
// becomes a leaf that does not require grad.
//
// On source's own device the replica views source's memory (no copy, as
// PyTorch's broadcast keeps the source for its device); elsewhere it gets a
// fresh copy (Tensor::To, so simulated devices count it), leaving memory a
// previous forward's graph still uses untouched.
//
// Errors: undefined tensors, shape or dtype mismatch (InvalidArgument naming
// both), copy failures. The replica must not be used by another thread
// during the call.
#ifndef TANDEM_TENSOR_REPLICATE_H_
#define TANDEM_TENSOR_REPLICATE_H_

#include "absl/status/status.h"
#include "tensor/tensor.h"

namespace tandem {

absl::Status ReplicateInto(const Tensor& source, const Tensor& replica);

}  // namespace tandem

#endif  // TANDEM_TENSOR_REPLICATE_H_
