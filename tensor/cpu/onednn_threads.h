// Internal to tensor/cpu: applies the process-wide BLAS thread count
// (tensor/cpu/blas.h, 1 by default) to this thread's OpenMP teams before a
// oneDNN call. OpenMP's thread count is per calling thread, so every rank
// thread calls this before its oneDNN work; cheap when nothing changed.
#ifndef TANDEM_TENSOR_CPU_ONEDNN_THREADS_H_
#define TANDEM_TENSOR_CPU_ONEDNN_THREADS_H_

namespace tandem::cpu {

void ApplyBlasThreadsToOneDnn();

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_ONEDNN_THREADS_H_
