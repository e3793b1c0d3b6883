// DDP's gradient communication hooks: how a gradient bucket travels
// (PyTorch's DistributedDataParallel.register_comm_hook and its built-in
// default_hooks). DdpOptions::comm_hook picks one per model; DDP applies it
// to every bucket, launched from the gradient hooks as soon as the bucket
// is complete, so it overlaps backward exactly as the plain all-reduce.
//
//   kAllReduce      the default: all-reduce the f32/f64 bucket and average.
//   kF16Compress    PyTorch's fp16_compress_hook:  wire = f16(bucket),
//   kBf16Compress   bf16_compress_hook:            wire /= world_size
//                   (computed in float, rounded to the wire dtype, as
//                   PyTorch's div_ on an f16/bf16 tensor), all-reduce (sum)
//                   the wire tensor, then copy it back into the bucket,
//                   widened. Half the bytes on the wire; gradients lose
//                   precision to the wire dtype (bf16 keeps f32's range,
//                   f16 does not: a gradient past 65504 becomes inf, which
//                   a GradScaler then skips).
//
// The same bytes reach every engine (sim, mpi, nccl: comm's BufferView
// carries f16/bf16), so the three agree bit for bit.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_COMM_HOOK_H_
#define TANDEM_TRAIN_PARALLEL_DDP_COMM_HOOK_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::train {

enum class DdpCommHook : int8_t { kAllReduce, kF16Compress, kBf16Compress };

// "allreduce", "fp16_compress", "bf16_compress" (PyTorch's hook names).
const char* DdpCommHookName(DdpCommHook hook);
// The inverse of DdpCommHookName; nullopt for an unknown name.
std::optional<DdpCommHook> DdpCommHookFromName(const char* name);

// The wire dtype of a compressing hook; nullopt for kAllReduce.
std::optional<DType> WireDType(DdpCommHook hook);

// The compression half: a new tensor on `bucket`'s device, of `wire`
// dtype, holding wire(bucket) / world_size as described above. Blocking
// on the CPU; queued on the device's stream elsewhere.
absl::StatusOr<Tensor> CompressBucket(const Tensor& bucket, DType wire,
                                      int64_t world_size);
// The decompression half: bucket = widen(reduced), in place (bucket keeps
// its storage: the parameters' gradients view it).
absl::Status DecompressBucket(const Tensor& reduced, const Tensor& bucket);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_COMM_HOOK_H_
