// Writing a file the user named (a checkpoint, --trace, --metrics) without
// ever destroying what the path names.
//
//   TANDEM_RETURN_IF_ERROR(base::CheckOutputPath(path, "--trace=" + path));
//   ... the run ...
//   TANDEM_RETURN_IF_ERROR(base::WriteOutputFile(path, bytes, "trace"));
//
// What the path is decides how it is written (lstat, then stat through a
// symbolic link):
//   absent, or a regular file   replaced atomically: the bytes go to
//                               "<path>.tmp.<pid>" in the same folder, which
//                               is fsync'ed and renamed over the path
//                               (atomic on POSIX within one file system),
//                               then the folder is fsync'ed so the rename is
//                               durable. A reader sees the old file or the
//                               new one in full, even after a crash.
//   a symbolic link             followed: its target is written by these
//                               rules (a regular target is replaced in the
//                               target's folder, and the link stays a link,
//                               as `cmd > link` does). A link to nothing is
//                               refused: create the target first.
//   a character device          written in place, never renamed over
//   (/dev/null, a terminal)     (renaming a regular file over /dev/null, as
//   or a FIFO with a reader     root, replaces the system's /dev/null).
//   a FIFO nobody reads         refused (opening it would block).
//   a directory, a block        refused, naming the path and its type.
//   device, a socket
//
// Errors name `what` (the caller's label: "checkpoint", "trace"), the path
// and the failing call; codes from errno (kNotFound, kPermissionDenied, else
// kInternal), kFailedPrecondition for a path of a refused kind. A failed
// replacement leaves the path unchanged and no temporary file.
//
// Blocking (disk I/O). Thread-safe for distinct paths; two writers of one
// path race (the last rename wins, each file whole).
#ifndef TANDEM_BASE_OUTPUT_FILE_H_
#define TANDEM_BASE_OUTPUT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::base {

// Writes `bytes` to `path` as described above.
absl::Status WriteOutputFile(const std::string& path, std::string_view bytes,
                             const std::string& what);

// Renames `from` over `to` and fsyncs the folder so that the rename survives
// a crash (a commit of files written by WriteOutputFile). Both must be
// regular files (`to` may be absent): a link, a device or a FIFO at either is
// FailedPrecondition, never renamed. Errors name both paths.
absl::Status RenameDurably(const std::string& from, const std::string& to,
                           const std::string& what);

// Whether WriteOutputFile(path) would write in place (a device or a FIFO,
// possibly through a link) rather than replace a regular file. Errors as
// WriteOutputFile's for a path it refuses.
absl::StatusOr<bool> WritesInPlace(const std::string& path,
                                   const std::string& what);

// Before a run: OK when WriteOutputFile(path) could write there now. For a
// file to replace, creates and removes a probe beside it (named after this
// process, so that the processes of one job do not race); for a device or
// FIFO, opens it for writing. Errors start with `what` ("--trace=t.json")
// and say what to do.
absl::Status CheckOutputPath(const std::string& path, const std::string& what);

// Before a run, for an output that is a folder of files (an export): OK when
// `path` is a folder this process can create files in, or is absent and its
// parent is such a folder (the writer creates it). InvalidArgument starting
// with `what` for a file or device in its place, a link to nothing, a
// missing parent, or no permission (a probe file is created and removed).
absl::Status CheckOutputFolder(const std::string& path,
                               const std::string& what);

}  // namespace tandem::base

#endif  // TANDEM_BASE_OUTPUT_FILE_H_
