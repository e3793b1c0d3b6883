#include "train/examples/runner/trace_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/output_file.h"
#include "base/run_paths.h"
#include "base/trace/trace.h"
#include "train/launch/backend.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train {

std::string TracePartPath(const std::string& path, int rank) {
  return absl::StrCat(path, ".rank", rank);
}

namespace {

absl::Status PartExists(const std::string& path, const std::string& part) {
  return absl::FailedPreconditionError(absl::StrCat(
      "--trace=", path, ": ", part,
      " already exists and was not written by this run; the ranks write "
      "their parts under that name and rank 0 removes them after merging, "
      "which would destroy it. Move it away (or remove a part an earlier "
      "run left behind), or pass another --trace"));
}

}  // namespace

absl::Status CheckNoTraceParts(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : path.substr(0, slash);
  const std::string stem =
      slash == std::string::npos ? path : path.substr(slash + 1);
  DIR* dir = ::opendir(folder.c_str());
  // A missing folder is named by the output check before this one.
  if (dir == nullptr) return absl::OkStatus();
  std::string found;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (base::IsRankPart(stem, name) && (found.empty() || name < found)) {
      found = name;
    }
  }
  ::closedir(dir);
  if (found.empty()) return absl::OkStatus();
  return PartExists(
      path, slash == std::string::npos
                ? found
                : absl::StrCat(folder == "/" ? "" : folder, "/", found));
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
  const std::string part = TracePartPath(path, comm.rank());
  struct stat st;
  absl::Status written = ::lstat(part.c_str(), &st) == 0
                             ? PartExists(path, part)
                             : trace::WriteChromeTrace(part);
  // Every rank says whether it wrote its part, even one whose write failed
  // (so that rank 0 never waits for it in vain), and rank 0 merges and
  // removes the parts only when every rank wrote its own: a part a rank
  // refused to write is somebody else's file. Bounded by the engine's
  // per-collective timeout (--timeout).
  absl::Status agreed = CheckRanksAgree(
      comm, DeviceFor(comm),
      {{"its trace part", written.ok() ? "written" : "not written"}});
  if (!written.ok()) return written;
  if (!agreed.ok()) {
    if (agreed.code() != absl::StatusCode::kInvalidArgument) return agreed;
    return absl::FailedPreconditionError(
        absl::StrCat("--trace=", path,
                     ": not every rank could write its part, so rank 0 "
                     "merged and removed nothing (",
                     agreed.message(), ")"));
  }
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
