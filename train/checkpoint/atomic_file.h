// Crash-safe file replacement for checkpoints.
//
//   TANDEM_RETURN_IF_ERROR(WriteFileAtomically("/ckpt/model.safetensors",
//                                              bytes));
//
// A reader of `path` sees either the old file or the new one in full, never a
// torn mix, even if the process or the machine dies mid-write: the bytes go to
// a temporary file in the same folder ("<path>.tmp.<pid>"), which is fsync'ed,
// renamed over `path` (atomic on POSIX within one file system), and then the
// folder is fsync'ed so that the rename itself is durable. The one mechanism
// is base/output_file.h, whose rules for paths that are not regular files
// apply: a symbolic link is followed (its target replaced), a character
// device or a FIFO is written in place (never renamed over: as root that
// would replace /dev/null), a directory or block device is refused.
//
// Blocking (disk I/O). Thread-safe for distinct paths; two writers of one path
// race (the last rename wins, each file whole).
#ifndef TANDEM_TRAIN_CHECKPOINT_ATOMIC_FILE_H_
#define TANDEM_TRAIN_CHECKPOINT_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::train::checkpoint {

// Replaces `path` with `bytes` as described above. The folder must exist.
// Errors (kInternal/kNotFound/kPermissionDenied from errno) name the path and
// the failing call; the temporary file is removed and `path` is unchanged.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes);

// Renames `from` over `to` (atomic on POSIX within one file system) and
// fsyncs the folder so that the rename survives a crash. Both must be
// regular files (`to` may be absent): a link, device or FIFO at either is
// FailedPrecondition, never renamed over. Errors name both.
absl::Status RenameDurably(const std::string& from, const std::string& to);

// The whole content of `path` (base::ReadInputFile: a regular file, or a
// FIFO with a writer within 30 s; never a device or directory; at most this
// machine's physical memory). NotFound when it does not exist; other errors
// name the path and the reason.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Whether `path` exists (any file type).
bool FileExists(const std::string& path);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_ATOMIC_FILE_H_
