#include "comm/stall_note.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tandem::comm {

std::string StallNote(int rank, std::string_view what, absl::Duration waited,
                      std::string_view progress, absl::Duration left) {
  const std::string remaining =
      left == absl::InfiniteDuration()
          ? std::string("no timeout")
          : absl::StrCat("timeout in ", absl::FormatDuration(absl::Trunc(
                                            left, absl::Milliseconds(100))));
  return absl::StrCat(
      "rank ", rank, ": still waiting for ",
      absl::string_view(what.data(), what.size()), " for ",
      absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(100))), "; ",
      absl::string_view(progress.data(), progress.size()), "; ", remaining,
      "\n");
}

void PrintStallNote(int rank, std::string_view what, absl::Duration waited,
                    std::string_view progress, absl::Duration left) {
  const std::string line = StallNote(rank, what, waited, progress, left);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

std::string NameMembers(std::string_view noun,
                        const std::vector<int64_t>& ids) {
  const absl::string_view n(noun.data(), noun.size());
  if (ids.empty()) return absl::StrCat("no ", n, "s");
  std::string out = absl::StrCat(n, ids.size() == 1 ? " " : "s ");
  const size_t named = std::min<size_t>(ids.size(), kMaxNamedMembers);
  for (size_t i = 0; i < named; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", ids[i]);
  }
  if (ids.size() > named) {
    absl::StrAppend(&out, " and ", ids.size() - named, " more");
  }
  return out;
}

}  // namespace tandem::comm
