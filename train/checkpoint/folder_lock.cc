#include "train/checkpoint/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem::train::checkpoint {
namespace {

absl::Status ErrnoStatus(int err, std::string message) {
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(std::move(message));
    default:
      return absl::InternalError(std::move(message));
  }
}

// The holder line the file holds (at most one short line), "" when empty.
std::string ReadHolder(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  return std::string(absl::StripAsciiWhitespace(
      absl::string_view(buf, static_cast<size_t>(n))));
}

std::string ThisHolder() {
  char host[256] = "unknown host";
  if (::gethostname(host, sizeof(host)) != 0) {
    std::strcpy(host, "unknown host");
  }
  host[sizeof(host) - 1] = '\0';
  return absl::StrCat("pid ", ::getpid(), " on ", host, " since ",
                      absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", absl::Now(),
                                       absl::LocalTimeZone()));
}

}  // namespace

absl::StatusOr<FolderLock> FolderLock::Acquire(const std::string& dir,
                                               const std::string& what,
                                               std::string* took_over) {
  std::string path = absl::StrCat(dir, "/", kLockFile);
  // A link or a device in the lock file's place is not ours to open.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", path,
                     " is not a regular file; remove it (tandem keeps its "
                     "run lock there)"));
  }
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    return ErrnoStatus(
        err, absl::StrCat(what, ": cannot open the run lock ", path, ": ",
                          std::strerror(err),
                          "; pass a --checkpoint_dir this run can write"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = ReadHolder(fd);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " is in use by another run (",
          holder.empty() ? "its lock file names no holder" : holder, "; lock ",
          path,
          "): two runs on one folder would overwrite each other's "
          "checkpoints. Wait for that run to end, stop it, or give this "
          "run another --checkpoint_dir"));
    }
    return ErrnoStatus(
        err,
        absl::StrCat(what, ": cannot lock ", path, ": ", std::strerror(err),
                     " (the file system may not support locks); use a "
                     "--checkpoint_dir on a local disk"));
  }
  const std::string previous = ReadHolder(fd);
  if (took_over != nullptr) {
    *took_over =
        previous.empty()
            ? ""
            : absl::StrCat(what, ": taking over the run lock left by ",
                           previous,
                           ", which no longer holds it (that run was killed "
                           "or crashed)");
  }
  const std::string line = absl::StrCat(ThisHolder(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, line.data(), line.size(), 0) !=
                                     static_cast<ssize_t>(line.size())) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat(what, ": cannot write the run lock ",
                                         path, ": ", std::strerror(err)));
  }
  return FolderLock(fd, std::move(path));
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

FolderLock::~FolderLock() { Release(); }

void FolderLock::Release() {
  if (fd_ < 0) return;
  // Emptied while still locked: the next run finds no holder to report.
  // A failure leaves a stale line, which the next run reports as taken over.
  (void)!::ftruncate(fd_, 0);
  ::close(fd_);  // drops the flock
  fd_ = -1;
}

}  // namespace tandem::train::checkpoint
