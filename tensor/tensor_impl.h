// Internal: the object a Tensor handle points to. Only tensor/ code (ops,
// kernels, autograd) includes this header.
//
// Autograd state lives here, per tensor (there is no global tape). It is
// read and written only by the thread that owns the tensor's graph.
#ifndef TANDEM_TENSOR_TENSOR_IMPL_H_
#define TANDEM_TENSOR_TENSOR_IMPL_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "tensor/allocator.h"
#include "tensor/autograd/autograd.h"
#include "tensor/tensor.h"

namespace tandem {

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // never null for a defined tensor
  int64_t offset = 0;                // in elements
  Shape shape;
  int64_t numel = 0;
  DType dtype = DType::kF32;

  // ---- Autograd.
  bool requires_grad = false;
  // The op that produced this tensor; null for leaves.
  std::shared_ptr<Node> grad_fn;
  // Leaves only: the accumulated gradient (undefined when none).
  Tensor grad;
  // Leaves only: `grad`'s value is zero but its memory was not written
  // (Tensor::MarkGradZero). The backward engine's first write overwrites
  // it (a GEMM with beta = 0) and clears the mark; Tensor::grad() writes
  // the zeros first when anything else reads it; installing or dropping a
  // gradient clears the mark.
  bool grad_marked_zero = false;
  std::vector<std::pair<HookHandle, PostAccumulateGradHook>> hooks;
  HookHandle next_hook_handle = 0;
  // Non-leaves only: the storage-less twin that the nodes consuming this
  // tensor hold as their input (made by RecordOp on first use, shared by
  // every later consumer, replaced when grad_fn changes). The backward
  // engine needs an input's identity, shape, dtype, device and grad_fn,
  // never its data, so holding the twin instead of this tensor lets an
  // activation's memory go as soon as no handle and no saved tensor
  // refers to it, as PyTorch's graph edges (which point at nodes) do.
  std::shared_ptr<TensorImpl> graph_edge;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_TENSOR_IMPL_H_
