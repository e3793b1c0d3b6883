#include "train/loop/virtual_rank_printer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

VirtualRankPrinter::VirtualRankPrinter(comm::Communicator& comm, Device device,
                                       VirtualWorld vw)
    : comm_(comm),
      device_(device),
      vw_(vw),
      printer_(comm),
      kept_(vw.on() ? vw.local : 0) {}

absl::Status VirtualRankPrinter::PrintOnRank(int64_t rank,
                                             std::string_view text) {
  if (!vw_.on()) {
    printer_.PrintOnAllRanks(text);
    return absl::OkStatus();
  }
  const int64_t v = rank - vw_.first;
  if (v < 0 || v >= vw_.local) {
    return absl::InvalidArgumentError(
        absl::StrCat("VirtualRankPrinter on rank ", comm_.rank(),
                     ": virtual rank ", rank, " is not one this rank plays (",
                     vw_.first, " to ", vw_.first + vw_.local - 1, ")"));
  }
  const std::string prefix =
      absl::StrCat("[", comm::RankName(static_cast<int>(rank)), "] ");
  size_t start = 0;
  while (true) {
    const size_t end = text.find('\n', start);
    kept_[v] += prefix;
    kept_[v].append(text.substr(start, end - start));
    kept_[v] += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return absl::OkStatus();
}

void VirtualRankPrinter::PrintOnRank0(std::string_view text) const {
  printer_.PrintOnRank0(text);
}

absl::Status VirtualRankPrinter::Flush() {
  if (!vw_.on()) return absl::OkStatus();
  std::string mine;
  for (std::string& k : kept_) {
    mine += k;
    k.clear();
  }
  // Lengths first, then every rank's bytes padded to the longest, packed
  // eight to an int64 (the staged all-gather every device has).
  const int64_t world = comm_.size();
  std::vector<int64_t> lengths(world);
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(comm_, device_,
                                        {static_cast<int64_t>(mine.size())},
                                        absl::MakeSpan(lengths)));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest == 0) return absl::OkStatus();
  const int64_t words = (longest + 7) / 8;
  std::vector<int64_t> send(words, 0);
  std::memcpy(send.data(), mine.data(), mine.size());
  std::vector<int64_t> all(words * world);
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm_, device_, send, absl::MakeSpan(all)));
  if (comm_.rank() != 0) return absl::OkStatus();
  std::string text;
  for (int64_t r = 0; r < world; ++r) {
    text.append(reinterpret_cast<const char*>(all.data() + r * words),
                lengths[r]);
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  printer_.PrintOnRank0(text);
  return absl::OkStatus();
}

}  // namespace tandem::train
