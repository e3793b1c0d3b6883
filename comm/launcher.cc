#include "comm/launcher.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm {

absl::Status MostTellingStatus(const std::vector<RankStatus>& statuses) {
  const RankStatus* first = nullptr;
  for (const RankStatus& rs : statuses) {
    if (rs.status.ok()) continue;
    if (rs.status.code() != absl::StatusCode::kAborted) {
      first = &rs;
      break;
    }
    if (first == nullptr) first = &rs;
  }
  if (first == nullptr) return absl::OkStatus();
  return absl::Status(
      first->status.code(),
      absl::StrCat("rank ", first->rank, ": ", first->status.message()));
}

}  // namespace tandem::comm
