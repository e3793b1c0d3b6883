#include "train/checkpoint/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  auto error = [&path](int err, const char* call) {
    const std::string message = absl::StrCat("checkpoint: ", call, " of ", path,
                                             " failed: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
                         : absl::InternalError(message);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(errno, "open");
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return error(err, "read");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace tandem::train::checkpoint
