#include "train/examples/trace_file.h"

#include <unistd.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/output_file.h"
#include "base/trace/trace.h"

namespace tandem::train {

absl::Status CheckOutputFile(const std::string& flag, const std::string& path) {
  return base::CheckOutputPath(path, absl::StrCat("--", flag, "=", path));
}

std::string TracePartPath(const std::string& path, int rank) {
  return absl::StrCat(path, ".rank", rank);
}

absl::Status FinishRankTrace(comm::Communicator& comm,
                             const std::string& path) {
  trace::Stop();
  absl::StatusOr<bool> in_place = base::WritesInPlace(path, "trace");
  if (!in_place.ok()) return in_place.status();
  if (*in_place) {
    // No part files beside a device (/dev/null.rank1): rank 0's track only.
    return comm.rank() == 0 ? trace::WriteChromeTrace(path) : absl::OkStatus();
  }
  absl::Status written =
      trace::WriteChromeTrace(TracePartPath(path, comm.rank()));
  // Every rank reaches the barrier, even one whose write failed, so that
  // rank 0 never waits for it in vain.
  // Bounded by the engine's per-collective timeout (--timeout).
  absl::Status arrived = comm.Barrier();
  if (!written.ok()) return written;
  if (!arrived.ok()) return arrived;
  if (comm.rank() != 0) return absl::OkStatus();
  std::vector<std::string> parts;
  for (int r = 0; r < comm.size(); ++r) {
    parts.push_back(TracePartPath(path, r));
  }
  absl::Status merged = trace::MergeChromeTraces(parts, path);
  if (!merged.ok()) {
    return absl::Status(
        merged.code(),
        absl::StrCat(
            merged.message(),
            " (rank 0 merges the ranks' parts; if the processes do "
            "not share a file system, collect the ",
            TracePartPath(path, 0),
            " ... files and merge them with trace::MergeChromeTraces)"));
  }
  for (const std::string& part : parts) std::remove(part.c_str());
  return absl::OkStatus();
}

absl::Status WriteProcessTrace(const std::string& path) {
  trace::Stop();
  return trace::WriteChromeTrace(path);
}

}  // namespace tandem::train
