// Test-only kernels for nccl_stream_test (plain types; see test_kernels.cu).
#ifndef TANDEM_COMM_NCCL_TEST_KERNELS_H_
#define TANDEM_COMM_NCCL_TEST_KERNELS_H_

#include <cstdint>

namespace tandem::comm::nccl_testing {

// Enqueues on `stream` (a cudaStream_t) a one-block kernel that spins for
// `spin_cycles` GPU clock cycles and then writes `value` into out[0, n).
// Returns cudaGetLastError() as an int.
int LaunchSlowFill(float* out, int64_t n, float value, int64_t spin_cycles,
                   void* stream);

}  // namespace tandem::comm::nccl_testing

#endif  // TANDEM_COMM_NCCL_TEST_KERNELS_H_
