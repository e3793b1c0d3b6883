#include "base/input_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem {
namespace {

// What a file that is not regular is, for messages.
const char* Kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Waits for a FIFO opened O_NONBLOCK to have data or its writer's EOF.
// Linux reports no POLLHUP on a FIFO whose writer never came, so a FIFO
// nobody opens for writing times out here instead of blocking forever.
absl::Status AwaitWriter(int fd, const std::string& path, absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    pollfd p = {fd, POLLIN, 0};
    const absl::Duration left = deadline - absl::Now();
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(left), 0, 1000));
    const int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(path, " is a FIFO and nothing wrote to it within ",
                       absl::FormatDuration(wait),
                       "; start its writer first, or pass a regular file"));
    }
  }
}

}  // namespace

bool IsStreamInput(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

absl::StatusOr<int> OpenInputFile(const std::string& path,
                                  const InputFileOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  const bool fifo = S_ISFIFO(st.st_mode);
  if (!S_ISREG(st.st_mode) && !fifo) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is ", Kind(st.st_mode),
        ", not a file to read: pass a regular file (or a pipe, read once)"));
  }
  const int fd =
      open(path.c_str(), O_RDONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  if (fifo) {
    if (absl::Status s = AwaitWriter(fd, path, options.writer_wait); !s.ok()) {
      close(fd);
      return s;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  return fd;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path,
                                          const InputFileOptions& options) {
  absl::StatusOr<int> fd = OpenInputFile(path, options);
  if (!fd.ok()) return fd.status();
  std::string contents;
  struct stat st;
  if (fstat(*fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if (st.st_size > options.max_bytes) {
      close(*fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, " holds ", st.st_size, " bytes, more than the ",
                       options.max_bytes, " this reader takes"));
    }
    contents.reserve(static_cast<size_t>(st.st_size));
  }
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(*fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(*fd);
      return absl::DataLossError(absl::StrCat(path, ": cannot read after byte ",
                                              contents.size(), " (",
                                              std::strerror(err), ")"));
    }
    if (n == 0) break;
    if (static_cast<int64_t>(contents.size()) + n > options.max_bytes) {
      close(*fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(path, " holds more than the ", options.max_bytes,
                       " bytes this reader takes; stopped reading there"));
    }
    contents.append(buffer, static_cast<size_t>(n));
  }
  close(*fd);
  return contents;
}

}  // namespace tandem
