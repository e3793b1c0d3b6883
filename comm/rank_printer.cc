#include "comm/rank_printer.h"

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::comm {

std::string RankName(int rank) { return absl::StrCat("GPU", rank); }

RankPrinter::RankPrinter(const Communicator& comm)
    : rank_(comm.rank()), sink_(&comm.output()) {}

RankPrinter::RankPrinter(int rank, LineSink& sink)
    : rank_(rank), sink_(&sink) {}

void RankPrinter::PrintOnRank0(std::string_view text) const {
  if (rank_ != 0) return;
  WriteLines("", text);
}

void RankPrinter::PrintOnAllRanks(std::string_view text) const {
  WriteLines(absl::StrCat("[", RankName(rank_), "] "), text);
}

void RankPrinter::WriteLines(std::string_view prefix_view,
                             std::string_view text_view) const {
  // Debian's Abseil has its own string_view type; convert once.
  const absl::string_view prefix(prefix_view.data(), prefix_view.size());
  absl::string_view text(text_view.data(), text_view.size());
  // A trailing newline ends the last line rather than starting an empty one.
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (prefix.empty()) {
      sink_->WriteLine(std::string_view(line.data(), line.size()));
    } else {
      sink_->WriteLine(absl::StrCat(prefix, line));
    }
  }
}

}  // namespace tandem::comm
