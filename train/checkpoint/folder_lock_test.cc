#include "train/checkpoint/folder_lock.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string TestDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/folder_lock_" + name + "_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr) << dir;
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A child process that holds the lock on `dir` until it is killed; returns
// its pid once the lock is held.
pid_t ChildHoldingLock(const std::string& dir) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    absl::StatusOr<FolderLock> lock = FolderLock::Acquire(dir, "child");
    const char byte = lock.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &byte, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(byte, 'y');
  return pid;
}

TEST(FolderLockTest, ASecondRunIsRefusedNamingTheHolder) {
  const std::string dir = TestDir("held");
  const pid_t child = ChildHoldingLock(dir);
  absl::StatusOr<FolderLock> lock =
      FolderLock::Acquire(dir, "toy_ddp: --checkpoint_dir=ck");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(lock.status().message()),
              AllOf(StartsWith("toy_ddp: --checkpoint_dir=ck is in use by "
                               "another run (pid " +
                               std::to_string(child) + " on "),
                    HasSubstr("give this run another --checkpoint_dir")));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
}

TEST(FolderLockTest, AKilledHoldersLockIsTakenOverSayingWhose) {
  const std::string dir = TestDir("stale");
  const pid_t child = ChildHoldingLock(dir);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  std::string took_over;
  absl::StatusOr<FolderLock> lock =
      FolderLock::Acquire(dir, "gpt_ddp: --checkpoint_dir=ck", &took_over);
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_THAT(took_over,
              AllOf(StartsWith("gpt_ddp: --checkpoint_dir=ck: taking over the "
                               "run lock left by pid " +
                               std::to_string(child) + " on "),
                    HasSubstr("no longer holds it")));
  // The file now names this process.
  EXPECT_THAT(Read(dir + "/run.lock"),
              StartsWith(absl::StrCat("pid ", ::getpid(), " on ")));
}

TEST(FolderLockTest, ReleaseEmptiesTheFileAndFreesTheFolder) {
  const std::string dir = TestDir("release");
  {
    absl::StatusOr<FolderLock> first = FolderLock::Acquire(dir, "a");
    ASSERT_TRUE(first.ok()) << first.status();
    // Within one process too, a second lock on the folder is refused.
    EXPECT_EQ(FolderLock::Acquire(dir, "b").status().code(),
              absl::StatusCode::kFailedPrecondition);
    // Moving keeps the one lock.
    FolderLock moved = *std::move(first);
    EXPECT_FALSE(FolderLock::Acquire(dir, "b").ok());
  }
  EXPECT_EQ(Read(dir + "/run.lock"), "");
  std::string took_over = "unset";
  EXPECT_TRUE(FolderLock::Acquire(dir, "c", &took_over).ok());
  EXPECT_EQ(took_over, "");
}

TEST(FolderLockTest, ALinkInTheLockFilesPlaceIsRefused) {
  const std::string dir = TestDir("link");
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep";
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/run.lock").c_str()), 0);
  absl::StatusOr<FolderLock> lock = FolderLock::Acquire(dir, "x");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(lock.status().message()),
              HasSubstr("is not a regular file"));
  EXPECT_EQ(Read(victim), "keep");
}

TEST(FolderLockTest, AMissingFolderIsNamed) {
  const std::string dir = TestDir("missing") + "/no/such";
  absl::StatusOr<FolderLock> lock = FolderLock::Acquire(dir, "x");
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(lock.status().message()),
              HasSubstr(dir + "/run.lock"));
}

}  // namespace
}  // namespace tandem::train::checkpoint
