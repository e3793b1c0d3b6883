#include "train/launch/worker_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

class WorkerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();  // what tandemrun does: orphans are ours to reap
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::filesystem::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  // The pid a shell wrote to `name`, waiting (bounded) for the file.
  pid_t ReadPid(const std::string& name) {
    for (int i = 0; i < 3000; ++i) {
      std::ifstream in(dir_ / name);
      pid_t pid = 0;
      if (in >> pid && pid > 0) return pid;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }

  // Whether group `pgid` is gone within a minute (a bound, not a timing).
  bool GoneSoon(pid_t pgid) {
    for (int i = 0; i < 6000; ++i) {
      if (!GroupAlive(pgid)) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::vector<std::string> Shell(const std::string& script) {
    return {"sh", "-c", script};
  }

  std::filesystem::path dir_;
};

TEST_F(WorkerProcessTest, AWorkerLeadsAGroupOfItsOwn) {
  absl::StatusOr<pid_t> pid =
      SpawnInOwnGroup(Shell("echo $FOO > " + (dir_ / "out").string()),
                      {"FOO=bar", "PATH=/usr/bin:/bin"}, STDERR_FILENO, 0);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(getpgid(*pid), *pid);
  EXPECT_NE(getpgid(*pid), getpgrp());
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(dir_ / "out");
  std::string got;
  in >> got;
  EXPECT_EQ(got, "bar");
}

TEST_F(WorkerProcessTest, AProgramThatCannotStartIsNamed) {
  absl::StatusOr<pid_t> pid =
      SpawnInOwnGroup({"/no/such/program"}, {}, STDERR_FILENO, 3);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(),
              HasSubstr("cannot start '/no/such/program' for rank 3"));
  pid = SpawnInOwnGroup({"no-such-program-on-path"}, {}, STDERR_FILENO, 0);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("No such file"));
  // Found but not executable: the exec's own error comes back.
  const std::string plain = (dir_ / "plain").string();
  std::ofstream(plain) << "data\n";
  pid = SpawnInOwnGroup({plain}, {}, STDERR_FILENO, 0);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(pid.status().message(), HasSubstr("Permission denied"));
}

// `sh -c 'sleep 60 & ...; wait'`: ending the group ends the sleep too, not
// only the shell (issue 25: orphans held the caller's stdout).
TEST_F(WorkerProcessTest, EndingAGroupEndsWhatTheWorkerStarted) {
  const std::string file = (dir_ / "child").string();
  absl::StatusOr<pid_t> pid =
      SpawnInOwnGroup(Shell("sleep 60 & echo $! > " + file + "; wait"),
                      {"PATH=/usr/bin:/bin"}, STDERR_FILENO, 0);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const pid_t child = ReadPid("child");
  ASSERT_GT(child, 0);
  EndGroups({*pid}, absl::Seconds(30));
  EXPECT_FALSE(GroupAlive(*pid));
  EXPECT_EQ(kill(child, 0), -1);
  EXPECT_EQ(kill(*pid, 0), -1);
}

// A member that ignores SIGTERM is killed after the grace period.
TEST_F(WorkerProcessTest, AGroupIgnoringSigtermIsKilled) {
  const std::string file = (dir_ / "ready").string();
  absl::StatusOr<pid_t> pid =
      SpawnInOwnGroup(Shell("trap '' TERM; echo $$ > " + file +
                            "; while :; do sleep 0.05; done"),
                      {"PATH=/usr/bin:/bin"}, STDERR_FILENO, 0);
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_GT(ReadPid("ready"), 0);
  EndGroups({*pid}, absl::Milliseconds(100));
  EXPECT_TRUE(GoneSoon(*pid));
}

// kill -9 of the launcher: the watchdog ends its workers' groups, children
// included (issue 25: they trained on to the end).
TEST_F(WorkerProcessTest, TheWatchdogEndsTheGroupsOfAKilledLauncher) {
  const std::string file = (dir_ / "child").string();
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    absl::StatusOr<std::unique_ptr<Watchdog>> dog =
        Watchdog::Start(absl::Seconds(1), 4);
    if (!dog.ok()) _exit(3);
    absl::StatusOr<pid_t> pid = SpawnInOwnGroup(
        Shell("trap '' TERM; sleep 60 & echo \"$$ $!\" > " + file +
              ".tmp; mv " + file + ".tmp " + file + "; wait"),
        {"PATH=/usr/bin:/bin"}, STDERR_FILENO, 0);
    if (!pid.ok()) _exit(4);
    (*dog)->Add(*pid);
    pause();
    _exit(0);
  }
  pid_t worker = -1;
  pid_t child = -1;
  for (int i = 0; i < 3000 && child <= 0; ++i) {
    std::ifstream in(file);
    in >> worker >> child;
    if (child <= 0) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(child, 0);
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  // The shell ignores SIGTERM: only the watchdog's SIGKILL ends it.
  EXPECT_TRUE(GoneSoon(worker));
  EXPECT_EQ(kill(child, 0), -1);
}

// A launcher that ends normally says goodbye: the watchdog leaves without
// touching anything.
TEST_F(WorkerProcessTest, AWatchdogLeavesQuietlyWhenTold) {
  absl::StatusOr<std::unique_ptr<Watchdog>> dog =
      Watchdog::Start(absl::Seconds(1), 4);
  ASSERT_TRUE(dog.ok()) << dog.status();
  const pid_t dog_pid = (*dog)->pid();
  EXPECT_NE(getpgid(dog_pid), getpgrp());
  dog->reset();  // reaps it
  EXPECT_EQ(kill(dog_pid, 0), -1);
}

}  // namespace
}  // namespace tandem::train
