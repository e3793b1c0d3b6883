#include "train/data/synthetic_images.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/tensor.h"

namespace tandem::train {

absl::StatusOr<Sample> SyntheticImages::Get(int64_t index,
                                            Generator& /*gen*/) const {
  if (index < 0 || index >= size_) {
    return absl::OutOfRangeError(absl::StrCat("synthetic image ", index, " of ",
                                              size_, " (0..", size_ - 1, ")"));
  }
  const int64_t k = first_ + index;
  const int64_t s = image_size_;
  std::vector<float> pixels(static_cast<size_t>(3 * s * s));
  Generator gen(seed_ + 1 + static_cast<uint64_t>(k));
  gen.Normal(pixels.data(), static_cast<int64_t>(pixels.size()), 0.f, 1.f);
  const int64_t label = k % num_classes_;
  const int64_t channel = (label / s) % 3;
  const int64_t row = label % s;
  float* line = pixels.data() + (channel * s + row) * s;
  for (int64_t j = 0; j < s; ++j) line[j] += 2.f;
  TANDEM_ASSIGN_OR_RETURN(Tensor x,
                          Tensor::FromVector<float>(pixels, {3, s, s}));
  return Sample{std::move(x), label};
}

std::string SyntheticImages::Describe(int64_t index) const {
  return absl::StrCat("synthetic image ", first_ + index, " (seed ",
                      seed_ + 1 + static_cast<uint64_t>(first_ + index), ")");
}

}  // namespace tandem::train
