// tandem on CUDA: device discovery, registration of the CUDA allocator and
// kernels, and the per-thread current stream.
//
// Linking //tensor/cuda is all a program needs: a static initialiser
// registers the caching allocator (tensor/cuda/memory.h) and the kernels
// (the kernel table, tensor/dispatch/op_table.h) for DeviceType::kCUDA, so
// tensors and ops work on Device::CUDA(k):
//
//   if (tandem::cuda::DeviceCount() > 0) {
//     TANDEM_ASSIGN_OR_RETURN(Tensor w, w_cpu.To(Device::CUDA(0)));
//     TANDEM_ASSIGN_OR_RETURN(Tensor y, Linear(x, w, b));   // cuBLAS
//     TANDEM_ASSIGN_OR_RETURN(double v, Sum(y)->Item());     // waits
//   }
//
// Without a device (or in a build without CUDA) creating a CUDA tensor is a
// FailedPrecondition Status that says why; nothing crashes.
//
// Streams: "one stream per rank". Work a thread queues on device k (kernels,
// cuBLAS calls, copies) goes to that thread's CURRENT STREAM on k: the one
// set by SetCurrentStream, or else the thread's own stream, taken on first
// use from a per-device pool of non-blocking streams (and given back to the
// pool when the thread exits; streams are never destroyed). So a simulated
// rank that is a thread, or a process driving one GPU, gets one stream, and
// its work runs in issue order. Ops return once their work is queued.
// Synchronisation happens only where the host needs the data: copies to and
// from the host (Tensor::To, CopyFrom, Item), CrossEntropy's label check,
// and Synchronize(). Work queued by one thread is NOT ordered with work of
// another thread's stream: hand tensors across threads or to a
// communicator's stream with events (or Synchronize first).
//
// Precision: f32 matmuls use CUBLAS_COMPUTE_32F (no TF32), so results stay
// within float rounding of the CPU's; SetAllowTf32(true) trades that for
// tensor-core speed. f16/bf16 matmuls always use tensor cores with f32
// accumulation.
//
// Thread-safety: every function may be called from any thread; stream
// settings are per thread.
#ifndef TANDEM_TENSOR_CUDA_CUDA_H_
#define TANDEM_TENSOR_CUDA_CUDA_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cuda_stream.h"

namespace tandem::cuda {

// True when this binary was built against a CUDA toolkit.
bool BuiltWithCuda();

// The number of visible CUDA devices; 0 when there is no driver, no device,
// or no CUDA in this build (never an error). When it returns 0 and `reason`
// is not null, *reason says why (for skip messages and errors).
int DeviceCount(std::string* reason = nullptr);

// Registers the CUDA caching allocator for DeviceType::kCUDA (the kernels
// register themselves, next to their code, when the library loads). Done
// once by a static initialiser of //tensor/cuda; calling it again is
// harmless. Touches no device (works on machines without one). In a build
// without CUDA it registers an allocator whose every allocation fails with
// "tandem was built without CUDA".
absl::Status Register();

// The calling thread's current stream on `device` (for NCCL's
// set_compute_stream, events, or foreign kernels).
// Creates or takes the thread's own stream on first use. Errors: no such
// device, or the CUDA call that failed.
absl::StatusOr<CudaStreamHandle> CurrentStream(int device);

// Makes `stream` (owned by the caller) the calling thread's current stream
// on `device`; a null handle restores the thread's own stream.
// The caching allocator reuses a freed block only on the stream it was
// allocated on, so a stream passed here must outlive the tensors allocated
// while it was current (or EmptyCache() must run before destroying it).
absl::Status SetCurrentStream(int device, CudaStreamHandle stream);

// Blocks until the work queued on the calling thread's current stream of
// `device` has finished; returns the first error that work hit (a kernel
// fault surfaces here), naming the call.
absl::Status Synchronize(int device);

// TF32 tensor cores for f32 matmuls (process-wide; off by default).
void SetAllowTf32(bool allow);
bool AllowTf32();

}  // namespace tandem::cuda

#endif  // TANDEM_TENSOR_CUDA_CUDA_H_
