#include "comm/store/rendezvous.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::comm {

absl::Status ArriveAndWait(TcpStoreClient& client, const std::string& prefix,
                           int rank, int world_size) {
  const std::string base = absl::StrCat(prefix, "/arrived/");
  if (absl::Status s = client.Set(absl::StrCat(base, rank), "1"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, " of ",
                                               world_size, ": ", s.message()));
  }
  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(absl::StrCat(base, r));
  absl::Status s = client.Wait(keys);
  if (s.ok()) return s;
  if (!absl::IsDeadlineExceeded(s)) {
    return absl::Status(s.code(), absl::StrCat("rank ", rank, " of ",
                                               world_size, ": ", s.message()));
  }
  // Name the missing ranks, not the keys.
  std::vector<std::string> missing;
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<bool> here = client.Check({keys[r]});
    if (here.ok() && !*here) missing.push_back(absl::StrCat(r));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", rank, " of ", world_size, ": rank",
      missing.size() == 1 ? " " : "s ", absl::StrJoin(missing, ", "),
      " did not arrive at the TCP store at ", client.address(), " within ",
      absl::FormatDuration(client.timeout()),
      "; check that every worker started (same MASTER_ADDR/MASTER_PORT and "
      "WORLD_SIZE) and that none failed before joining"));
}

}  // namespace tandem::comm
