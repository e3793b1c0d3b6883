// One run per checkpoint folder: an exclusive lock that a run holds on its
// --checkpoint_dir for as long as it trains, so that a second run started on
// the same folder is refused before it reads or writes anything, instead of
// the two runs overwriting each other's checkpoints.
//
//   TANDEM_ASSIGN_OR_RETURN(FolderLock lock,
//                           FolderLock::Acquire(dir, "toy_ddp:
//                           --checkpoint_dir"));
//   ... train; the lock is released when `lock` is destroyed ...
//
// The lock is flock(2) on "<dir>/run.lock", a file that also says who holds
// it (pid, host, since when) for the refusal's message. The kernel drops a
// flock when its process dies however it dies (SIGKILL included), so a lock
// is never stale in the kernel's eyes; the file a dead holder leaves behind
// still names it, and the next run takes the lock over saying whose it was.
// The file is emptied, never removed, on release: removing a lock file
// while another process has it open would let two runs lock two different
// files of the same name. flock works across the processes of one machine
// and, on Linux, over NFS (emulated with byte-range locks); on a file
// system without locks Acquire fails, naming the folder.
//
// Thread-safety: a FolderLock is moved, not shared. Two FolderLocks of one
// process on one folder conflict as two processes would (each opens the
// file anew), so a process that runs two trainings on one folder at once is
// refused too.
#ifndef TANDEM_TRAIN_CHECKPOINT_FOLDER_LOCK_H_
#define TANDEM_TRAIN_CHECKPOINT_FOLDER_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem::train::checkpoint {

// The lock file's name inside the folder.
inline constexpr char kLockFile[] = "run.lock";

class FolderLock {
 public:
  // Locks `dir` (which must exist) without waiting. `what` starts every
  // message ("toy_ddp: --checkpoint_dir=ck"). FailedPrecondition when
  // another run holds it, naming that run's pid, host and start time and
  // what to do; the errno's code naming the file when the lock file cannot
  // be opened or locked. When the file names a holder that no longer holds
  // it (a run that was killed), `*took_over` (if given) is set to a line
  // saying so; the caller prints it.
  static absl::StatusOr<FolderLock> Acquire(const std::string& dir,
                                            const std::string& what,
                                            std::string* took_over = nullptr);

  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  // Empties the lock file and releases the lock.
  ~FolderLock();

  const std::string& path() const { return path_; }

 private:
  FolderLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void Release();

  int fd_ = -1;
  std::string path_;
};

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_FOLDER_LOCK_H_
