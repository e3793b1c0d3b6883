// The one check that a run never writes over what it reads: every path a
// run reads or writes (its data, the folder it starts from, its checkpoint
// folder, its exports, its trace and metrics, their per-rank parts) is
// declared in one list, and before anything runs an output that is,
// contains, or is contained in another declared path is refused.
//
//   TANDEM_RETURN_IF_ERROR(base::CheckRunPaths({
//       {.flag = "--data", .path = data, .role = PathRole::kInput},
//       {.flag = "--checkpoint_dir", .path = ck, .role = PathRole::kInOut},
//       {.flag = "--trace", .path = trace, .role = PathRole::kOutput,
//        .rank_parts = true},
//   }));
//
// Paths are compared as the file system resolves them, not as they are
// spelled: each is made absolute and its symbolic links are followed (a link
// to nothing resolves to where a write would create its target), and two
// existing paths with the same device and inode are the same file, so
// "d.csv", "./d.csv", a symbolic link to it and a hard link to it all name
// one file. A path that does not exist yet is resolved through its deepest
// existing folder.
//
// What conflicts, for every output O (kOutput or kInOut) and every other
// declared path P:
//   - O and P are the same file or folder;
//   - O is a folder that contains P, or P is a folder that contains O
//     (writing "ck/model.safetensors" as a trace destroys a checkpoint;
//     exporting into the data folder changes what the next run reads);
//   - with O.rank_parts, P is one of O's per-rank parts "<O>.rank<N>".
// Character devices (/dev/null, a terminal) are written in place and hold
// nothing to destroy: an output that is one is never refused for sharing it.
// Inputs are never compared with each other. Empty paths are skipped.
//
// The error (InvalidArgument: a usage error, nothing has run) names both
// flags as the user wrote them, the resolved path, and what to do.
//
// Thread-safe (no shared state); blocking only on the file system's
// metadata calls (lstat, readlink, stat; never open, so a FIFO never
// blocks it).
#ifndef TANDEM_BASE_RUN_PATHS_H_
#define TANDEM_BASE_RUN_PATHS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem::base {

enum class PathRole {
  kInput,   // read only
  kOutput,  // written (replaced or created)
  kInOut,   // read and written: a checkpoint folder
};

struct RunPath {
  std::string flag = {};  // how messages name it: "--data"
  std::string path = {};  // as the user gave it; empty: not used by this run
  PathRole role = PathRole::kInput;
  // The run may also write "<path>.rank<N>" (a trace's per-rank parts).
  bool rank_parts = false;
};

// The check described above; OK when no output touches another path.
absl::Status CheckRunPaths(const std::vector<RunPath>& paths);

// Whether `path` is "<base>.rank<N>" (N decimal digits): the name of one of
// a trace's per-rank parts, compared as text.
bool IsRankPart(const std::string& base, const std::string& path);

// `path` made absolute and resolved as described above ("/a/b/c" even when
// only "/a" exists). Exposed for the tests and for messages.
std::string ResolvedPath(const std::string& path);

}  // namespace tandem::base

#endif  // TANDEM_BASE_RUN_PATHS_H_
