#include "tensor/device.h"

#include <string>

namespace tandem {

std::string Device::ToString() const {
  if (is_cpu()) return "cpu";
  return (is_sim() ? "sim:" : "cuda:") + std::to_string(index_);
}

}  // namespace tandem
