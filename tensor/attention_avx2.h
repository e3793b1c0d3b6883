// The f32 CPU kernels of ScaledDotProductAttention on AVX2 + FMA
// (tensor/ops_attention.cc dispatches here when AttentionAvx2Usable).
//
// The same arithmetic as ops_attention.cc's portable kernels, vectorised:
// every dot product and every sum over keys is taken in double and rounded
// once to float, so results agree with the portable kernels to float
// rounding (the lanes run the same sums over the head dimension in the same
// order; only the softmax's row sums and exponentials are reordered or
// evaluated differently, at double precision). Forward keeps no [T, T]
// buffer beyond the probabilities the op saves for backward: scores live
// one row at a time. Backward keeps one: dS of the head in hand (PyTorch's
// softmax backward output), reused head to head.
//
// Shapes as in tensor/attention_kernels.h: q, k, v, y, gy, gq, gk, gv
// [bh, t, hd]; probs and mask [bh, t, t], all contiguous; mask may be null.
//
// Thread-safety: pure functions on caller-owned memory; each call allocates
// its own scratch (a few [t, hd] double blocks, and backward's [t, t]).
#ifndef TANDEM_TENSOR_ATTENTION_AVX2_H_
#define TANDEM_TENSOR_ATTENTION_AVX2_H_

#include <cstdint>

namespace tandem::internal {

// True when this CPU runs AVX2 and FMA (asked once) and hd is a multiple
// of 4 (one vector of doubles); false sends the caller to the portable
// kernels.
bool AttentionAvx2Usable(int64_t hd);

// probs = softmax(scale * q k^T, causal: probs[i, j] = 0 for j > i);
// y = (probs * mask) v.
void AttentionForwardAvx2(const float* q, const float* k, const float* v,
                          const float* mask, int64_t bh, int64_t t, int64_t hd,
                          bool causal, double scale, float* probs, float* y);

// The backward of the above (attention_kernels.h's formula); gq, gk, gv
// overwritten.
void AttentionBackwardAvx2(const float* gy, const float* q, const float* k,
                           const float* v, const float* probs,
                           const float* mask, int64_t bh, int64_t t, int64_t hd,
                           bool causal, double scale, float* gq, float* gk,
                           float* gv);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_ATTENTION_AVX2_H_
