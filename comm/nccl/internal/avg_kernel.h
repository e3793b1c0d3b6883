// Internal to comm/nccl: the division that turns NCCL's Sum into the
// contract's Avg (Sum / world size, rounded once). Plain types only, so the
// declaration is shared by the nvcc-compiled kernel and the host code.
#ifndef TANDEM_COMM_NCCL_INTERNAL_AVG_KERNEL_H_
#define TANDEM_COMM_NCCL_INTERNAL_AVG_KERNEL_H_

#include <cstdint>

namespace tandem::comm::nccl_internal {

// Element formats the kernel handles.
enum AvgFormat : int { kAvgF32 = 0, kAvgF64 = 1, kAvgF16 = 2, kAvgBF16 = 3 };

// Enqueues data[i] = data[i] / divisor for i in [0, count) on `stream` (a
// cudaStream_t) and returns cudaGetLastError() as an int (0 = cudaSuccess).
// f32 and f64 divide in their own precision; f16 and bf16 convert to f32,
// divide, and round to nearest even once. count == 0 enqueues nothing.
int LaunchDivideInPlace(void* data, int64_t count, int format, int divisor,
                        void* stream);

}  // namespace tandem::comm::nccl_internal

#endif  // TANDEM_COMM_NCCL_INTERNAL_AVG_KERNEL_H_
