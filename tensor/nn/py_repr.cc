#include "tensor/nn/py_repr.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tandem::nn {

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  std::snprintf(buf, sizeof(buf), "%.*e", digits - 1, value);
  const std::string sci = buf;
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  if (exponent < -4 || exponent >= 16) {
    // Python: mantissa without trailing zeros, exponent with a sign and at
    // least two digits ("1e-05", "1.5e+16").
    std::string mantissa = sci.substr(0, e);
    std::snprintf(buf, sizeof(buf), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    return mantissa + buf;
  }
  const int decimals = digits - 1 - exponent;
  std::snprintf(buf, sizeof(buf), "%.*f", decimals > 0 ? decimals : 0, value);
  std::string fixed = buf;
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

}  // namespace tandem::nn
