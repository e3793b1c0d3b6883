#include "tensor/half.h"

#include <cstdint>

#include "base/half.h"

namespace tandem {

// One implementation for the whole tree: base/half.h.
uint16_t FloatToHalfBits(float value) { return half::F16FromF32(value); }
float HalfBitsToFloat(uint16_t bits) { return half::F32FromF16(bits); }
uint16_t FloatToBFloat16Bits(float value) { return half::BF16FromF32(value); }
float BFloat16BitsToFloat(uint16_t bits) { return half::F32FromBF16(bits); }

}  // namespace tandem
