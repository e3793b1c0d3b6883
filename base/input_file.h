// Opening and reading an input file named by a flag, the way every reader
// should: a regular file, or a pipe or FIFO (`--data=<(zcat ...)`,
// /dev/stdin) read once, never a device or a directory, and never without a
// bound. A path that would read forever (/dev/zero, /dev/urandom), block
// forever (a FIFO nobody writes), or fill memory is refused with the file
// named and what it is.
//
//   TANDEM_ASSIGN_OR_RETURN(std::string text,
//                           ReadInputFile(path, {.max_bytes = 1 << 30}));
//
//   TANDEM_ASSIGN_OR_RETURN(int fd, OpenInputFile(path));  // caller closes
//
// Thread-safe (no shared state). Blocking: a FIFO waits up to
// `writer_wait` for its writer; reads block as the input does.
#ifndef TANDEM_BASE_INPUT_FILE_H_
#define TANDEM_BASE_INPUT_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

struct InputFileOptions {
  // More bytes than this is an error naming the file (ResourceExhausted).
  int64_t max_bytes = int64_t{1} << 32;
  // How long a FIFO may go without a writer before it is refused.
  absl::Duration writer_wait = absl::Seconds(30);
};

// Whether `path` is a pipe or FIFO (read once; cannot be re-read or seeked),
// after following symlinks. False for anything else, missing files included.
bool IsStreamInput(const std::string& path);

// Opens `path` for reading (O_CLOEXEC, blocking reads). NotFound when it
// cannot be opened (errno's reason); InvalidArgument for a directory, a
// device, a socket (naming the kind); DeadlineExceeded for a FIFO that no
// writer opened within `writer_wait`.
absl::StatusOr<int> OpenInputFile(const std::string& path,
                                  const InputFileOptions& options = {});

// OpenInputFile, then every byte up to options.max_bytes: ResourceExhausted
// naming the file when there are more; DataLoss for a read error.
absl::StatusOr<std::string> ReadInputFile(const std::string& path,
                                          const InputFileOptions& options = {});

}  // namespace tandem

#endif  // TANDEM_BASE_INPUT_FILE_H_
