// The one bridge from tensors to the communication layer: a whole tensor as
// the comm::BufferView a collective moves (a pointer, a count and the
// tensor's own dtype: tensor and comm share base/dtype.h's DType, so nothing
// is mapped). comm never includes tensor headers, so this mapping lives on the
// tensor side, here; DDP and every later parallel wrapper (FSDP, pipeline)
// build their views with it, and nothing else builds a BufferView from a
// tensor by hand.
//
// Contract:
//   - ToBufferView describes the whole of a defined tensor: data pointer of
//     its first element, numel() elements, its dtype; a CPU tensor is a
//     kHost view (device -1), a tensor on CUDA:k a kCuda view of device k.
//     A tandem Tensor is always contiguous and row-major (tensor/tensor.h),
//     so every defined tensor is one contiguous run of memory; a View() into
//     a flat bucket gives a view of just that slice.
//   - Errors are InvalidArgument and name what was expected and what was
//     found: an undefined tensor, a dtype or device outside the known ones.
//   - The view does not own memory: keep the tensor (or another tensor on
//     the same storage) alive and untouched until the collective's Work
//     completes.
// Pure functions; thread-safe.
//
//   TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(grads));
//   TANDEM_RETURN_IF_ERROR(
//       comm.AllReduce(view, comm::ReduceOp::kAvg)->Wait(absl::Minutes(1)));
#ifndef TANDEM_TRAIN_PARALLEL_CORE_TENSOR_COMM_H_
#define TANDEM_TRAIN_PARALLEL_CORE_TENSOR_COMM_H_

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/types.h"
#include "tensor/tensor.h"

namespace tandem::train {

// The whole of `t` as a buffer a collective can move (see the contract above).
absl::StatusOr<comm::BufferView> ToBufferView(const Tensor& t);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_TENSOR_COMM_H_
