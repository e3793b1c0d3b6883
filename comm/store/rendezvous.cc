#include "comm/store/rendezvous.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/stall_note.h"

namespace tandem::comm {

absl::Status ArriveAndWait(TcpStoreClient& client, const std::string& prefix,
                           int rank, int world_size,
                           absl::Duration stall_note_interval) {
  const std::string base = absl::StrCat(prefix, "/arrived/");
  if (absl::Status s = client.Set(absl::StrCat(base, rank), "1"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, " of ",
                                               world_size, ": ", s.message()));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(absl::StrCat(base, r));
  // Every rank is checked (one store round trip each: world_size is
  // bounded by the file-descriptor limit); NameMembers names at most 16.
  auto missing_ranks = [&] {
    std::vector<int64_t> missing;
    for (int r = 0; r < world_size; ++r) {
      absl::StatusOr<bool> here = client.Check({keys[r]});
      if (here.ok() && !*here) missing.push_back(r);
    }
    return missing;
  };
  absl::Status s;
  if (stall_note_interval <= absl::ZeroDuration()) {
    s = client.Wait(keys);
  } else {
    // In slices of the interval, so that rank 0 can say who is missing
    // while the others wait in silence; the store bounds each slice.
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + client.timeout();
    while (true) {
      const absl::Duration left = deadline - absl::Now();
      s = client.Wait(keys, std::max(std::min(stall_note_interval, left),
                                     absl::Milliseconds(1)));
      if (!absl::IsDeadlineExceeded(s) || absl::Now() >= deadline) break;
      if (rank != 0) continue;
      const std::vector<int64_t> missing = missing_ranks();
      if (missing.empty()) continue;
      PrintStallNote(
          rank,
          absl::StrCat("the rendezvous of ", world_size,
                       " ranks at the TCP store at ", client.address(),
                       " (keys under ", prefix, ")"),
          absl::Now() - start,
          absl::StrCat("not yet arrived: ", NameMembers("rank", missing)),
          deadline - absl::Now());
    }
  }
  if (s.ok()) return s;
  if (!absl::IsDeadlineExceeded(s)) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, " of ",
                                               world_size, ": ", s.message()));
  }
  // Name the missing ranks, not the keys.
  const std::vector<int64_t> missing = missing_ranks();
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", rank, " of ", world_size, ": ", NameMembers("rank", missing),
      " did not arrive at the TCP store at ", client.address(), " within ",
      absl::FormatDuration(client.timeout()),
      "; check that every worker started (same MASTER_ADDR/MASTER_PORT and "
      "WORLD_SIZE) and that none failed before joining"));
}

}  // namespace tandem::comm
