// The f32 <-> f16/bf16 conversions comm's reductions use, under comm's
// names: see base/half.h (one implementation for the whole tree, bit-exact
// with PyTorch's c10::Half / c10::BFloat16).
//
//   uint16_t h = comm::F16FromF32(0.1f);   // 0x2e66
//   float back = comm::F32FromF16(h);       // 0.0999755859375f
#ifndef TANDEM_COMM_HALF_H_
#define TANDEM_COMM_HALF_H_

#include "base/half.h"

namespace tandem::comm {

using ::tandem::half::BF16FromF32;
using ::tandem::half::F16FromF32;
using ::tandem::half::F32FromBF16;
using ::tandem::half::F32FromF16;

}  // namespace tandem::comm

#endif  // TANDEM_COMM_HALF_H_
