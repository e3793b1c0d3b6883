// Moving batches between devices with autograd, shared by DataParallel and
// Pipe: torch.chunk along dim 0, a differentiable copy to another device
// (tensor.to(device)), and the concatenation of pieces onto one device
// (the gather of torch.nn.parallel).
//
//   TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> parts, ChunkRows(x, 4));
//   TANDEM_ASSIGN_OR_RETURN(Tensor p1, CopyToDevice(parts[1],
//                                                   Device::Sim(1)));
//   ...
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, GatherRows(outputs, Device::Sim(0)));
//
// Every copy goes through Tensor::To / CopyFrom, so the allocator's copy
// path sees (and simulated devices count) each byte. All three record
// autograd nodes when grad mode is on and an input requires grad; their
// backward moves the gradient back the same way. Pure functions of their
// arguments: thread-safe for different tensors.
#ifndef TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_TRANSFER_H_
#define TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_TRANSFER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {

// The row counts torch.chunk gives `rows` rows split `chunks` ways: pieces
// of ceil(rows / chunks) rows and a smaller last one, so there may be fewer
// than `chunks` pieces (5 rows, 4 chunks: 2, 2, 1). rows >= 0, chunks >= 1
// (InvalidArgument otherwise); 0 rows gives no pieces.
absl::StatusOr<std::vector<int64_t>> ChunkSizes(int64_t rows, int64_t chunks);

// `x` (at least 1-d) split along dim 0 into ChunkSizes(x.dim(0), chunks)
// pieces: views sharing x's storage (differentiable, no copy).
absl::StatusOr<std::vector<Tensor>> ChunkRows(const Tensor& x, int64_t chunks);

// The row counts torch.tensor_split gives `rows` rows split into `sections`
// pieces (what torch.distributed.pipelining splits micro-batches with):
// exactly `sections` pieces, the first rows % sections of them one row
// longer (5 rows, 4 sections: 2, 1, 1, 1). rows >= 0, sections >= 1
// (InvalidArgument otherwise); pieces may be empty when rows < sections.
absl::StatusOr<std::vector<int64_t>> TensorSplitSizes(int64_t rows,
                                                      int64_t sections);

// `x` (at least 1-d) split along dim 0 into pieces of `sizes` rows (summing
// to x.dim(0), InvalidArgument otherwise): views sharing x's storage
// (differentiable, no copy). ChunkRows is SplitRows(x, ChunkSizes(...)).
absl::StatusOr<std::vector<Tensor>> SplitRows(const Tensor& x,
                                              absl::Span<const int64_t> sizes);

// `x` on `device`: x itself when it is there already, otherwise a copy whose
// backward copies the gradient back to x's device.
absl::StatusOr<Tensor> CopyToDevice(const Tensor& x, Device device);

// The pieces (same dtype, same shape but for dim 0, any devices)
// concatenated along dim 0 into a new tensor on `device`; the backward hands
// each piece its rows of the gradient, on the piece's device.
// InvalidArgument naming the piece and both shapes when they disagree.
absl::StatusOr<Tensor> GatherRows(absl::Span<const Tensor> pieces,
                                  Device device);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_TRANSFER_H_
