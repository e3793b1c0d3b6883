#include "train/checkpoint/reshard_plan.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "train/checkpoint/json.h"

namespace tandem::train::checkpoint {

absl::StatusOr<std::vector<PlannedRead>> PlanReads(
    const ShardIndex& index, absl::Span<const SliceRequest> requests,
    std::string_view source) {
  std::vector<PlannedRead> reads;
  for (size_t r = 0; r < requests.size(); ++r) {
    const SliceRequest& want = requests[r];
    auto it = index.tensors.find(want.tensor);
    if (it == index.tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint index ", std::string(source), " holds no tensor ",
          JsonQuote(want.tensor),
          " (a checkpoint of another model, or of a mode that saves other "
          "optimizer state)"));
    }
    const IndexTensor& t = it->second;
    if (want.begin < 0 || want.end < want.begin || want.end > t.numel()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint index ", std::string(source), ": elements [", want.begin,
          ", ", want.end, ") of tensor ", JsonQuote(want.tensor),
          " were asked for; it has ", t.numel()));
    }
    if (want.begin == want.end) continue;
    const int64_t size = DTypeSize(t.dtype);
    // The first slice that ends past `begin` (slices tile the tensor in
    // order: ValidateShardIndex).
    auto slice = std::upper_bound(
        t.slices.begin(), t.slices.end(), want.begin,
        [](int64_t e, const IndexSlice& s) { return e < s.end; });
    for (; slice != t.slices.end() && slice->begin < want.end; ++slice) {
      const int64_t lo = std::max(want.begin, slice->begin);
      const int64_t hi = std::min(want.end, slice->end);
      PlannedRead read{slice->file, slice->offset + (lo - slice->begin) * size,
                       (hi - lo) * size, r, lo - want.begin};
      PlannedRead* last = reads.empty() ? nullptr : &reads.back();
      if (last != nullptr && last->request == r && last->file == read.file &&
          last->file_offset + last->bytes == read.file_offset &&
          last->dest_element * size + last->bytes == read.dest_element * size) {
        last->bytes += read.bytes;  // the next slice follows in the file
      } else {
        reads.push_back(std::move(read));
      }
    }
  }
  return reads;
}

}  // namespace tandem::train::checkpoint
