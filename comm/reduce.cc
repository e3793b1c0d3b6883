#include "comm/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/half.h"
#include "comm/types.h"

namespace tandem::comm {
namespace {

// Storage type S and accumulation type A of each dtype class, with the exact
// conversions between them.
template <typename S, typename A>
struct Plain {
  using Storage = S;
  using Acc = A;
  static A Load(S v) { return static_cast<A>(v); }
  static S Store(A a) { return static_cast<S>(a); }
};

struct F16 {
  using Storage = uint16_t;
  using Acc = float;
  static float Load(uint16_t v) { return half::F32FromF16(v); }
  static uint16_t Store(float a) { return half::F16FromF32(a); }
};

struct BF16 {
  using Storage = uint16_t;
  using Acc = float;
  static float Load(uint16_t v) { return half::F32FromBF16(v); }
  static uint16_t Store(float a) { return half::BF16FromF32(a); }
};

struct SumOp {
  template <typename A>
  A operator()(A a, A b) const {
    return static_cast<A>(a + b);
  }
};
struct ProdOp {
  template <typename A>
  A operator()(A a, A b) const {
    return static_cast<A>(a * b);
  }
};
template <typename A>
bool IsNan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}
// A NaN on either side wins, so Max/Min propagate NaN. `|`, not `||`: no
// branch, so the compiler vectorises the loop (compare, compare, blend).
struct MaxOp {
  template <typename A>
  A operator()(A a, A b) const {
    return ((b > a) | IsNan(b)) ? b : a;
  }
};
struct MinOp {
  template <typename A>
  A operator()(A a, A b) const {
    return ((b < a) | IsNan(b)) ? b : a;
  }
};

// The most elements a block holds (StoreBlock's per-thread staging).
constexpr int64_t kBlock = 2048;
// Kernel's accumulator block on the stack: at most 8 KiB whatever the type
// (2048 f32, 1024 f64/i64), well inside L1, and half of the smallest stack a
// simulated rank's fiber may have (16 KiB; a 16 KiB f64 block overflowed
// it).
constexpr int64_t kAccBlockBytes = 8 << 10;

// Buffers are fetched this many ahead of the one being read or written.
// Each buffer is a short run on its own pages (thousands of small ones in a
// large simulated cluster), too short for the hardware prefetcher to find:
// without this, every buffer starts with a wait on memory.
constexpr size_t kAhead = 4;

// From this many destinations on, results are written with non-temporal
// stores: thousands of small buffers (a large simulated cluster) are not
// read again before they leave the cache, and a normal store would first
// read every line it writes.
constexpr size_t kStreamDestinations = 256;

// Copies `bytes` from `src` (16-byte aligned) to `dst` bypassing the cache
// where `dst` is 16-byte aligned; plain copies for the rest.
void StreamCopy(void* dst, const void* src, int64_t bytes) {
#if defined(__SSE2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const int64_t head =
      std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  if (head > 0 || reinterpret_cast<uintptr_t>(s + head) % 16 != 0) {
    std::memcpy(d, s, static_cast<size_t>(bytes));
    return;
  }
  int64_t i = 0;
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  if (i < bytes) std::memcpy(d + i, s + i, static_cast<size_t>(bytes - i));
#else
  std::memcpy(dst, src, static_cast<size_t>(bytes));
#endif
}

// Orders the streamed stores before whatever follows (the Work's completion).
void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Asks for the cache lines of [p, p + bytes) (for writing when `write`).
void Prefetch(const void* p, int64_t bytes, bool write) {
  const char* c = static_cast<const char*>(p);
  for (int64_t off = 0; off < bytes; off += 64) {
    if (write) {
      __builtin_prefetch(c + off, 1);
    } else {
      __builtin_prefetch(c + off, 0);
    }
  }
}

// Two sources into one or two destinations (a 2-rank all-reduce or
// reduce-scatter) in one pass: each element is loaded, combined and stored
// at once, without the accumulator block's second pass (the same
// arithmetic, so the same bits). A destination may be one of the sources
// (in place): element j is read before it is written, and no element is
// read after another is written, so the loop has no carried dependence.
template <typename Tr, typename Op>
void KernelTwoSources(int64_t count, const void* src0, const void* src1,
                      void* dst0, void* dst1, Op op, bool avg,
                      typename Tr::Acc divisor) {
  using S = typename Tr::Storage;
  using A = typename Tr::Acc;
  const S* s0 = static_cast<const S*>(src0);
  const S* s1 = static_cast<const S*>(src1);
  S* d0 = static_cast<S*>(dst0);
  S* d1 = static_cast<S*>(dst1);
  auto value = [&](int64_t j) {
    A v = op(Tr::Load(s0[j]), Tr::Load(s1[j]));
    if (avg) v = v / divisor;
    return Tr::Store(v);
  };
  if (d1 == nullptr) {
#pragma GCC ivdep
    for (int64_t j = 0; j < count; ++j) d0[j] = value(j);
    return;
  }
#pragma GCC ivdep
  for (int64_t j = 0; j < count; ++j) {
    const S out = value(j);
    d0[j] = out;
    d1[j] = out;
  }
}

// Writes one block's results (`acc`, m elements of the accumulation type) to
// every destination at element `base`: streamed past the cache for many
// destinations, otherwise stored with the next destinations prefetched.
// Inlined: a simulated rank's fiber may have as little as 16 KiB of stack,
// which Kernel's accumulator block nearly fills; no frame on top of it.
template <typename Tr>
__attribute__((always_inline)) inline void StoreBlock(
    const typename Tr::Acc* acc, int64_t m, int64_t base,
    absl::Span<void* const> dsts) {
  using S = typename Tr::Storage;
  const int64_t block_bytes = m * static_cast<int64_t>(sizeof(S));
  const size_t ndst = dsts.size();
  if (ndst >= kStreamDestinations) {
    // Converted once, then streamed to every destination. Per thread
    // rather than on the stack: a simulated rank's fiber may have as
    // little as 16 KiB, and acc already takes up to that. No fiber switch
    // can happen inside this call.
    alignas(64) static thread_local S result[kBlock];
    for (int64_t j = 0; j < m; ++j) result[j] = Tr::Store(acc[j]);
    for (void* d : dsts)
      StreamCopy(static_cast<S*>(d) + base, result, block_bytes);
    StreamFence();
    return;
  }
  for (size_t r = 0; r < std::min(ndst, kAhead); ++r) {
    Prefetch(static_cast<S*>(dsts[r]) + base, block_bytes, true);
  }
  for (size_t r = 0; r < ndst; ++r) {
    if (r + kAhead < ndst) {
      Prefetch(static_cast<S*>(dsts[r + kAhead]) + base, block_bytes, true);
    }
    S* out = static_cast<S*>(dsts[r]) + base;
    for (int64_t j = 0; j < m; ++j) out[j] = Tr::Store(acc[j]);
  }
}

// Never inlined: its accumulator block (8-16 KiB) must not land in a
// caller's frame too (a fiber of 16 KiB holds one such frame, not two).
template <typename Tr, typename Op>
__attribute__((noinline)) void Kernel(int64_t count,
                                      absl::Span<const void* const> srcs,
                                      absl::Span<void* const> dsts, Op op,
                                      bool avg, typename Tr::Acc divisor) {
  using S = typename Tr::Storage;
  using A = typename Tr::Acc;
  const size_t nsrc = srcs.size();
  if (nsrc == 2 && (dsts.size() == 1 || dsts.size() == 2)) {
    KernelTwoSources<Tr>(count, srcs[0], srcs[1], dsts[0],
                         dsts.size() == 2 ? dsts[1] : nullptr, op, avg,
                         divisor);
    return;
  }
  constexpr int64_t kAcc =
      std::min(kBlock, kAccBlockBytes / static_cast<int64_t>(sizeof(A)));
  alignas(64) A acc[kAcc];
  for (int64_t base = 0; base < count; base += kAcc) {
    const int64_t m = std::min(kAcc, count - base);
    const S* s0 = static_cast<const S*>(srcs[0]) + base;
    if (nsrc >= 2) {
      const S* s1 = static_cast<const S*>(srcs[1]) + base;
      for (int64_t j = 0; j < m; ++j)
        acc[j] = op(Tr::Load(s0[j]), Tr::Load(s1[j]));
    } else {
      for (int64_t j = 0; j < m; ++j) acc[j] = Tr::Load(s0[j]);
    }
    // Sources 0 and 1 are read above; the loop below fetches r + kAhead.
    const int64_t block_bytes = m * static_cast<int64_t>(sizeof(S));
    for (size_t r = 2; r < std::min(nsrc, 2 + kAhead); ++r) {
      Prefetch(static_cast<const S*>(srcs[r]) + base, block_bytes, false);
    }
    for (size_t r = 2; r < nsrc; ++r) {
      if (r + kAhead < nsrc) {
        Prefetch(static_cast<const S*>(srcs[r + kAhead]) + base, block_bytes,
                 false);
      }
      const S* s = static_cast<const S*>(srcs[r]) + base;
      for (int64_t j = 0; j < m; ++j) acc[j] = op(acc[j], Tr::Load(s[j]));
    }
    if (avg) {
      for (int64_t j = 0; j < m; ++j) acc[j] = acc[j] / divisor;
    }
    StoreBlock<Tr>(acc, m, base, dsts);
  }
}

// The canonical tree over the sources, in order (comm/ordered/ordered_sum.h):
// T(lo, hi) is source lo when hi - lo == 1, otherwise T(lo, mid) + T(mid, hi)
// with mid = lo + (hi - lo) / 2. Two sources are one add, Kernel's sum.
// Per block of kTreeBlock elements, node (lo, hi) is computed into `out` and
// its right child into `scratch` (deeper nodes in the blocks after it), all
// in the accumulation type; per-thread buffers, not the stack (a simulated
// rank's fiber may have 16 KiB; no fiber switch happens inside this call).
constexpr int64_t kTreeBlock = 512;

template <typename Tr>
void TreeNode(absl::Span<const void* const> srcs, size_t lo, size_t hi,
              int64_t base, int64_t m, typename Tr::Acc* out,
              typename Tr::Acc* scratch) {
  using S = typename Tr::Storage;
  const S* first = static_cast<const S*>(srcs[lo]) + base;
  if (hi - lo == 1) {
    for (int64_t j = 0; j < m; ++j) out[j] = Tr::Load(first[j]);
    return;
  }
  const size_t mid = lo + (hi - lo) / 2;
  if (hi - lo == 2) {
    const S* second = static_cast<const S*>(srcs[mid]) + base;
    for (int64_t j = 0; j < m; ++j)
      out[j] = Tr::Load(first[j]) + Tr::Load(second[j]);
    return;
  }
  TreeNode<Tr>(srcs, lo, mid, base, m, out, scratch + kTreeBlock);
  TreeNode<Tr>(srcs, mid, hi, base, m, scratch, scratch + kTreeBlock);
  for (int64_t j = 0; j < m; ++j) out[j] = out[j] + scratch[j];
}

// Not inlined into Dispatch, so that its frame never adds to Kernel's.
template <typename Tr>
__attribute__((noinline)) void TreeKernel(int64_t count,
                                          absl::Span<const void* const> srcs,
                                          absl::Span<void* const> dsts) {
  using A = typename Tr::Acc;
  if (srcs.size() <= 2) {
    Kernel<Tr>(count, srcs, dsts, SumOp(), false, A(1));
    return;
  }
  int64_t depth = 0;
  while ((size_t{1} << depth) < srcs.size()) ++depth;
  // The node, then one block per level below it.
  static thread_local std::vector<A> work;
  const size_t need = static_cast<size_t>((depth + 1) * kTreeBlock);
  if (work.size() < need) work.resize(need);
  for (int64_t base = 0; base < count; base += kTreeBlock) {
    const int64_t m = std::min(kTreeBlock, count - base);
    TreeNode<Tr>(srcs, 0, srcs.size(), base, m, work.data(),
                 work.data() + kTreeBlock);
    StoreBlock<Tr>(work.data(), m, base, dsts);
  }
}

template <typename Tr>
void Dispatch(ReduceOp op, int64_t count, absl::Span<const void* const> srcs,
              absl::Span<void* const> dsts, int64_t avg_divisor) {
  using A = typename Tr::Acc;
  switch (op) {
    case ReduceOp::kSum:
      Kernel<Tr>(count, srcs, dsts, SumOp(), false, A(1));
      return;
    case ReduceOp::kAvg:
      Kernel<Tr>(count, srcs, dsts, SumOp(), true, static_cast<A>(avg_divisor));
      return;
    case ReduceOp::kProd:
      Kernel<Tr>(count, srcs, dsts, ProdOp(), false, A(1));
      return;
    case ReduceOp::kMax:
      Kernel<Tr>(count, srcs, dsts, MaxOp(), false, A(1));
      return;
    case ReduceOp::kMin:
      Kernel<Tr>(count, srcs, dsts, MinOp(), false, A(1));
      return;
    case ReduceOp::kTreeSum:
      TreeKernel<Tr>(count, srcs, dsts);
      return;
  }
}

// Integers: Sum/Prod in the unsigned type (wrap-around is defined there),
// Max/Min in the type itself.
template <typename T, typename U>
void DispatchInt(ReduceOp op, int64_t count, absl::Span<const void* const> srcs,
                 absl::Span<void* const> dsts) {
  switch (op) {
    case ReduceOp::kSum:
      Kernel<Plain<T, U>>(count, srcs, dsts, SumOp(), false, U(1));
      return;
    case ReduceOp::kProd:
      Kernel<Plain<T, U>>(count, srcs, dsts, ProdOp(), false, U(1));
      return;
    case ReduceOp::kMax:
      Kernel<Plain<T, T>>(count, srcs, dsts, MaxOp(), false, T(1));
      return;
    case ReduceOp::kMin:
      Kernel<Plain<T, T>>(count, srcs, dsts, MinOp(), false, T(1));
      return;
    case ReduceOp::kAvg:
    case ReduceOp::kTreeSum:
      return;  // rejected before dispatch
  }
}

}  // namespace

absl::Status ReduceInto(DType dtype, ReduceOp op, int64_t count,
                        absl::Span<const void* const> srcs,
                        absl::Span<void* const> dsts, int64_t avg_divisor) {
  if (srcs.empty()) {
    return absl::InvalidArgumentError(
        "ReduceInto: expected at least one source");
  }
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceInto: count must be >= 0; found ", count));
  }
  if (!IsValidDType(dtype) || !IsValidReduceOp(op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceInto: unknown dtype or reduce op: ", DTypeName(dtype), ", ",
        ReduceOpName(op)));
  }
  if (op == ReduceOp::kAvg && (!IsFloatingPoint(dtype) || avg_divisor < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceInto: avg needs a floating-point dtype and a divisor >= 1; "
        "found ",
        DTypeName(dtype), " and divisor ", avg_divisor));
  }
  if (op == ReduceOp::kTreeSum && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReduceInto: tree_sum needs a floating-point dtype; found ",
        DTypeName(dtype)));
  }
  if (count == 0 || dsts.empty()) return absl::OkStatus();
  // One source written back onto itself: nothing changes (x / 1 == x).
  if (srcs.size() == 1 && dsts.size() == 1 && srcs[0] == dsts[0] &&
      (op != ReduceOp::kAvg || avg_divisor == 1) && dtype != DType::kF16 &&
      dtype != DType::kBF16) {
    return absl::OkStatus();
  }
  // The small sum two ranks make most (a loss, a flag, a norm): a plain
  // loop, without the kernels' dispatch, which costs more than the adds at
  // a few elements. The same arithmetic (a + b in source order), so the
  // same bits.
  if (dtype == DType::kF32 && op == ReduceOp::kSum && srcs.size() == 2 &&
      count <= 16) {
    const float* a = static_cast<const float*>(srcs[0]);
    const float* b = static_cast<const float*>(srcs[1]);
    float sum[16];
    for (int64_t i = 0; i < count; ++i) sum[i] = a[i] + b[i];
    for (void* dst : dsts) {
      std::memcpy(dst, sum, static_cast<size_t>(count) * sizeof(float));
    }
    return absl::OkStatus();
  }
  switch (dtype) {
    case DType::kF32:
      Dispatch<Plain<float, float>>(op, count, srcs, dsts, avg_divisor);
      break;
    case DType::kF64:
      Dispatch<Plain<double, double>>(op, count, srcs, dsts, avg_divisor);
      break;
    case DType::kF16:
      Dispatch<F16>(op, count, srcs, dsts, avg_divisor);
      break;
    case DType::kBF16:
      Dispatch<BF16>(op, count, srcs, dsts, avg_divisor);
      break;
    case DType::kI32:
      DispatchInt<int32_t, uint32_t>(op, count, srcs, dsts);
      break;
    case DType::kI64:
      DispatchInt<int64_t, uint64_t>(op, count, srcs, dsts);
      break;
    case DType::kU8:
      DispatchInt<uint8_t, uint8_t>(op, count, srcs, dsts);
      break;
  }
  return absl::OkStatus();
}

}  // namespace tandem::comm
