#include "train/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/input_file.h"
#include "base/memory.h"
#include "base/output_file.h"

namespace tandem::train::checkpoint {

absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes) {
  return base::WriteOutputFile(path, bytes, "checkpoint");
}

absl::Status RenameDurably(const std::string& from, const std::string& to) {
  return base::RenameDurably(from, to, "checkpoint");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  // base/input_file.h: a FIFO in a checkpoint's or model folder's place is
  // refused after 30 s without a writer instead of blocking in open() for
  // ever, a device (/dev/zero) at once, and a file larger than this
  // machine's memory by its size, before a byte is read.
  const int64_t memory = PhysicalMemoryBytes();
  absl::StatusOr<std::string> bytes = ReadInputFile(
      path,
      {.max_bytes = memory > 0 ? memory : std::numeric_limits<int64_t>::max()});
  return bytes;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace tandem::train::checkpoint
