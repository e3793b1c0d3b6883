#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::base {
namespace {

absl::Status ErrnoError(int err, const std::string& what,
                        const std::string& call, const std::string& path) {
  const std::string message = absl::StrCat(
      what, ": ", call, " of ", path, " failed: ", std::strerror(err),
      "; check that the folder exists, is writable and has space");
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// How a path is written: replaced by a rename (at `path`, a link already
// resolved to its target) or written in place.
struct Target {
  std::string path;
  bool in_place = false;
};

std::string KindName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::StatusOr<Target> Resolve(const std::string& path,
                               const std::string& what) {
  struct stat link;
  if (::lstat(path.c_str(), &link) != 0) {
    if (errno == ENOENT) return Target{path, false};
    return ErrnoError(errno, what, "lstat", path);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && S_ISLNK(link.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": ", path,
          " is a symbolic link to a file that does not exist; create the "
          "target, or remove the link and pass the path itself"));
    }
    return ErrnoError(errno, what, "stat", path);
  }
  if (S_ISREG(st.st_mode)) {
    if (!S_ISLNK(link.st_mode)) return Target{path, false};
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) {
      return ErrnoError(errno, what, "realpath", path);
    }
    return Target{resolved, false};
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return Target{path, true};
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", path, " is ", KindName(st.st_mode),
                   ", not a file that can be written; pass a file path"));
}

// Opens a device or FIFO for writing without blocking: a FIFO nobody reads
// is refused rather than waited on.
absl::StatusOr<int> OpenInPlace(const std::string& path,
                                const std::string& what) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": ", path,
          " is a FIFO that nobody is reading; start its reader first, or "
          "pass a regular file"));
    }
    return ErrnoError(errno, what, "open", path);
  }
  // Writes block as usual from here on (a reader that is slow is waited for).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError(err, what, "fcntl", path);
  }
  return fd;
}

// Writes all of `bytes` to `fd`, retrying short writes and EINTR.
absl::Status WriteAll(int fd, std::string_view bytes, const std::string& what,
                      const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, what, "write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Makes a rename in the folder of `path` durable: the folder's entry must
// reach the disk too.
absl::Status SyncFolderOf(const std::string& path, const std::string& what) {
  const std::string folder = FolderOf(path);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return ErrnoError(errno, what, "open (folder)", folder);
  absl::Status status;
  if (::fsync(dir) != 0) {
    status = ErrnoError(errno, what, "fsync (folder)", folder);
  }
  ::close(dir);
  return status;
}

absl::Status WriteInPlace(const std::string& path, std::string_view bytes,
                          const std::string& what) {
  absl::StatusOr<int> fd = OpenInPlace(path, what);
  if (!fd.ok()) return fd.status();
  absl::Status status = WriteAll(*fd, bytes, what, path);
  if (::close(*fd) != 0 && status.ok()) {
    status = ErrnoError(errno, what, "close", path);
  }
  return status;
}

absl::Status Replace(const std::string& path, std::string_view bytes,
                     const std::string& what) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError(errno, what, "open", tmp);
  absl::Status status = WriteAll(fd, bytes, what, tmp);
  if (status.ok() && ::fsync(fd) != 0) {
    status = ErrnoError(errno, what, "fsync", tmp);
  }
  if (::close(fd) != 0 && status.ok()) {
    status = ErrnoError(errno, what, "close", tmp);
  }
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(errno, what, "rename to " + path, tmp);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return SyncFolderOf(path, what);
}

// FailedPrecondition unless `path` is a regular file (or, with
// `may_be_absent`, does not exist). Links are not followed.
absl::Status RequireRegular(const std::string& path, bool may_be_absent,
                            const std::string& what) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && may_be_absent) return absl::OkStatus();
    return ErrnoError(errno, what, "lstat", path);
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": ", path, " is ",
      S_ISLNK(st.st_mode) ? "a symbolic link" : KindName(st.st_mode),
      "; a commit renames files within their folder and never replaces "
      "anything but a regular file: remove it, or pass another folder"));
}

}  // namespace

absl::Status WriteOutputFile(const std::string& path, std::string_view bytes,
                             const std::string& what) {
  absl::StatusOr<Target> target = Resolve(path, what);
  if (!target.ok()) return target.status();
  return target->in_place ? WriteInPlace(target->path, bytes, what)
                          : Replace(target->path, bytes, what);
}

absl::StatusOr<bool> WritesInPlace(const std::string& path,
                                   const std::string& what) {
  absl::StatusOr<Target> target = Resolve(path, what);
  if (!target.ok()) return target.status();
  return target->in_place;
}

absl::Status RenameDurably(const std::string& from, const std::string& to,
                           const std::string& what) {
  if (absl::Status s = RequireRegular(from, false, what); !s.ok()) return s;
  if (absl::Status s = RequireRegular(to, true, what); !s.ok()) return s;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoError(errno, what, "rename to " + to, from);
  }
  return SyncFolderOf(to, what);
}

absl::Status CheckOutputPath(const std::string& path, const std::string& what) {
  absl::StatusOr<Target> target = Resolve(path, what);
  if (!target.ok()) return target.status();
  if (target->in_place) {
    absl::StatusOr<int> fd = OpenInPlace(target->path, what);
    if (!fd.ok()) return fd.status();
    ::close(*fd);
    return absl::OkStatus();
  }
  const std::string probe = absl::StrCat(target->path, ".probe", ::getpid());
  const int fd =
      ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot create the file (", std::strerror(errno), " for ",
        probe, "); check that its folder exists and is writable"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

absl::Status CheckOutputFolder(const std::string& path,
                               const std::string& what) {
  struct stat st;
  std::string folder = path;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", path, " is ",
          S_ISREG(st.st_mode)    ? "a file"
          : S_ISCHR(st.st_mode)  ? "a character device"
          : S_ISFIFO(st.st_mode) ? "a FIFO"
                                 : KindName(st.st_mode),
          ", not a folder; name a folder (it is created if absent)"));
    }
  } else if (::lstat(path.c_str(), &st) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path,
                     " is a symbolic link to nothing; remove it or name a "
                     "folder (it is created if absent)"));
  } else {
    // Absent: created in its parent, which must be a folder we can write.
    std::string trimmed = path;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    const size_t slash = trimmed.rfind('/');
    folder = slash == std::string::npos ? "."
             : slash == 0               ? "/"
                                        : trimmed.substr(0, slash);
    if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": cannot create the folder: its parent ", folder,
                       " is not an existing folder; create it first"));
    }
  }
  const std::string probe = absl::StrCat(folder, "/.tandem_probe", ::getpid());
  const int fd =
      ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cannot write in ", folder, " (", std::strerror(errno),
        "); name a folder this run can "
        "write"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

}  // namespace tandem::base
