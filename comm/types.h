// The vocabulary every communication backend shares: element types, reduce
// operations, memory spaces, the kinds of operation, and `BufferView`, the
// typed, non-owning description of a buffer that a collective moves.
//
// comm never includes tensor headers: a tensor hands its storage to a
// collective as a BufferView (pointer, element count, dtype, memory space).
//
//   std::vector<float> grads(1024);
//   comm::BufferView buf = comm::HostView(absl::MakeSpan(grads));
//   auto work = communicator.AllReduce(buf, comm::ReduceOp::kAvg);
//
// A BufferView does not own memory; whoever issues a collective keeps the
// memory alive and untouched until the collective's Work completes.
#ifndef TANDEM_COMM_TYPES_H_
#define TANDEM_COMM_TYPES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "base/dtype.h"

namespace tandem::comm {

// Element types a collective can move: base/dtype.h's DType, the one enum
// tensor and comm share (one numbering, one name table), so a tensor's dtype
// is a BufferView's dtype with no mapping. f16 is IEEE binary16, bf16 is
// bfloat16; both are stored as 16-bit patterns (see base/half.h).
using ::tandem::DType;
using ::tandem::DTypeName;
using ::tandem::DTypeSize;
using ::tandem::IsFloatingPoint;
using ::tandem::IsValidDType;

// The DType of a C++ element type (float, double, int32_t, int64_t, uint8_t).
// f16/bf16 views are usually built with an explicit dtype over uint16_t
// storage.
template <typename T>
constexpr DType DTypeOf() {
  return ::tandem::DTypeOf<T>::value;
}

// How AllReduce and ReduceScatter combine the ranks' elements.
//   kAvg is Sum divided by the world size; it is an error on integer dtypes.
//   f16 and bf16 are combined in f32 and rounded once at the end.
//   Integer Sum and Prod wrap around (two's complement), as in NCCL.
//   kTreeSum is the sum taken in one fixed order, the canonical tree over
//   ranks (comm/ordered/ordered_sum.h), floating-point dtypes only. It is
//   not one of kAllReduceOps: only an engine that reduces every rank's
//   buffer in one place offers it (Communicator::native_tree_sum(): sim);
//   the others reject it, and comm::OrderedAllReduce builds the same bits
//   from Send/Recv there.
enum class ReduceOp : int8_t { kSum, kAvg, kMax, kMin, kProd, kTreeSum };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg,
                                             ReduceOp::kMax, ReduceOp::kMin,
                                             ReduceOp::kProd};

// "sum", "avg", "max", "min", "prod", "tree_sum"; "reduce_op(<n>)" when
// invalid.
std::string ReduceOpName(ReduceOp op);
bool IsValidReduceOp(ReduceOp op);

// Where a buffer lives. The sim and MPI backends move host memory; NCCL moves
// CUDA device memory.
enum class MemorySpace : int8_t { kHost, kCuda };

// The operations of the Communicator contract, for fingerprints, messages and
// the bandwidth table.
enum class OpKind : int8_t {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kSend,
  kRecv,
  kBarrier,
};

// "AllReduce", "Broadcast", ...
std::string OpKindName(OpKind op);

// A typed, non-owning view of `count` contiguous elements.
// A null `data` is allowed only with count == 0.
struct BufferView {
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kF32;
  MemorySpace space = MemorySpace::kHost;
  int device = -1;  // CUDA ordinal when space == kCuda; -1 for host.

  // count * DTypeSize(dtype).
  int64_t bytes() const;
  // "f32[1024] host" or "bf16[8] cuda:1" (no pointer value: messages stay
  // comparable between runs).
  std::string DebugString() const;
};

// A host view over `count` elements of `dtype` at `data`.
inline BufferView HostView(void* data, int64_t count, DType dtype) {
  return BufferView{data, count, dtype, MemorySpace::kHost, -1};
}

// A host view over a span of a native element type.
template <typename T>
BufferView HostView(absl::Span<T> span) {
  return HostView(static_cast<void*>(span.data()),
                  static_cast<int64_t>(span.size()), DTypeOf<T>());
}

}  // namespace tandem::comm

#endif  // TANDEM_COMM_TYPES_H_
