#include "train/launch/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace tandem::train {
namespace {

// argv[0] as execvp would find it, resolved before fork (the child may only
// make async-signal-safe calls). Empty when nothing on PATH matches.
std::string ResolveProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(
           path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate =
        absl::StrCat(dir.empty() ? "." : std::string(dir), "/", program);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

int64_t MonotonicMillis() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void SleepMillis(int64_t ms) {
  timespec ts = {static_cast<time_t>(ms / 1000),
                 static_cast<long>((ms % 1000) * 1000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The watchdog's life after fork: async-signal-safe calls only, no
// allocation (`groups` has room for `max_groups` entries).
[[noreturn]] void WatchdogMain(int fd, pid_t* groups, int64_t max_groups,
                               int64_t grace_ms, const char* note,
                               size_t note_size) {
  setpgid(0, 0);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    sigaction(sig, &ignore, nullptr);
  }
  const int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    dup2(null_fd, STDOUT_FILENO);
  }
  // Hold nothing of tandemrun's (sockets, pipes) but the message pipe.
  rlimit lim = {};
  const int64_t max_fd =
      getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 65536
          ? static_cast<int64_t>(lim.rlim_cur)
          : 65536;
  for (int64_t f = 3; f < max_fd; ++f) {
    if (f != fd) close(static_cast<int>(f));
  }
  int64_t count = 0;
  int32_t message = 0;
  size_t have = 0;
  while (true) {
    const ssize_t n = read(fd, reinterpret_cast<char*>(&message) + have,
                           sizeof(message) - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // tandemrun is gone
    have += static_cast<size_t>(n);
    if (have < sizeof(message)) continue;
    have = 0;
    if (message == 0) _exit(0);  // goodbye: tandemrun ended its workers
    if (message > 0 && count < max_groups) {
      groups[count++] = message;
    } else if (message < 0) {
      for (int64_t i = 0; i < count; ++i) {
        if (groups[i] == -message) groups[i--] = groups[--count];
      }
    }
  }
  if (count == 0) _exit(0);
  if (write(STDERR_FILENO, note, note_size) < 0) {
    // stderr is gone too; the workers are stopped all the same.
  }
  for (int64_t i = 0; i < count; ++i) kill(-groups[i], SIGTERM);
  const int64_t deadline = MonotonicMillis() + grace_ms;
  while (MonotonicMillis() < deadline) {
    bool alive = false;
    for (int64_t i = 0; i < count && !alive; ++i) {
      alive = kill(-groups[i], 0) == 0;
    }
    if (!alive) _exit(0);
    SleepMillis(10);
  }
  for (int64_t i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

absl::StatusOr<pid_t> SpawnInOwnGroup(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env,
                                      int stderr_fd, int rank) {
  const auto cannot = [&](int err) {
    return absl::UnavailableError(
        absl::StrCat("tandemrun: cannot start '", argv[0], "' for rank ", rank,
                     ": ", std::strerror(err),
                     "; check the program path (it is looked up on PATH)"));
  };
  const std::string path = ResolveProgram(argv[0]);
  if (path.empty()) return cannot(ENOENT);
  std::vector<std::string> args = argv;
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  std::vector<std::string> vars = env;
  std::vector<char*> env_ptrs;
  for (std::string& e : vars) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  int exec_error[2];
  if (pipe2(exec_error, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("tandemrun: pipe() for rank ",
                                               rank, ": ", std::strerror(errno),
                                               " (ulimit -n too low?)"));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(exec_error[0]);
    close(exec_error[1]);
    return absl::UnavailableError(absl::StrCat(
        "tandemrun: fork() for rank ", rank, ": ", std::strerror(err),
        err == EAGAIN ? " (the process limit, ulimit -u, was hit)" : ""));
  }
  if (pid == 0) {
    // The child: async-signal-safe calls only until execve.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != parent) _exit(127);  // tandemrun died before prctl
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (dup2(stderr_fd, STDERR_FILENO) < 0) _exit(127);
    execve(path.c_str(), arg_ptrs.data(), env_ptrs.data());
    const int err = errno;
    if (write(exec_error[1], &err, sizeof(err)) < 0) {
      // The parent then sees a worker exit 127.
    }
    _exit(127);
  }
  setpgid(pid, pid);  // also here: the group exists before we signal it
  close(exec_error[1]);
  int err = 0;
  ssize_t n;
  do {
    n = read(exec_error[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(exec_error[0]);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    waitpid(pid, nullptr, 0);
    return cannot(err);
  }
  return pid;
}

void SignalGroup(pid_t pgid, int sig) {
  if (pgid > 0) killpg(pgid, sig);
}

std::optional<int> ReapGroup(pid_t pgid, pid_t leader) {
  std::optional<int> leader_status;
  int status = 0;
  pid_t p;
  while ((p = waitpid(-pgid, &status, WNOHANG)) > 0) {
    if (p == leader) leader_status = status;
  }
  return leader_status;
}

bool GroupAlive(pid_t pgid) {
  ReapGroup(pgid, -1);
  return pgid > 0 && killpg(pgid, 0) == 0;
}

void EndGroups(const std::vector<pid_t>& pgids, absl::Duration grace) {
  const auto any_alive = [&] {
    bool alive = false;
    for (pid_t g : pgids) alive = GroupAlive(g) || alive;
    return alive;
  };
  if (!any_alive()) return;
  for (pid_t g : pgids) SignalGroup(g, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (any_alive()) {
    if (absl::Now() >= deadline) {
      for (pid_t g : pgids) SignalGroup(g, SIGKILL);
      absl::SleepFor(absl::Milliseconds(10));
      any_alive();  // reap what SIGKILL ended
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<std::unique_ptr<Watchdog>> Watchdog::Start(absl::Duration grace,
                                                          int64_t max_groups) {
  // A socket, not a pipe: send(MSG_NOSIGNAL) to a watchdog that is gone
  // must not kill tandemrun with SIGPIPE.
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "tandemrun: socketpair() for the watchdog: ", std::strerror(errno)));
  }
  // Everything the watchdog needs, allocated before fork.
  std::vector<pid_t> groups(
      static_cast<size_t>(std::max<int64_t>(1, max_groups)));
  const std::string note = absl::StrCat(
      "tandemrun: watchdog: tandemrun (pid ", getpid(),
      ") died without stopping its workers; stopping their process groups "
      "(SIGTERM, then SIGKILL after ",
      absl::FormatDuration(grace), ")\n");
  const int64_t grace_ms = absl::ToInt64Milliseconds(grace);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::UnavailableError(absl::StrCat(
        "tandemrun: fork() for the watchdog: ", std::strerror(err)));
  }
  if (pid == 0) {
    close(fds[1]);
    WatchdogMain(fds[0], groups.data(), static_cast<int64_t>(groups.size()),
                 grace_ms, note.data(), note.size());
  }
  setpgid(pid, pid);  // also here: in its own group before Start returns
  close(fds[0]);
  return std::unique_ptr<Watchdog>(new Watchdog(pid, fds[1]));
}

void Watchdog::Send(int32_t message) {
  const char* p = reinterpret_cast<const char*>(&message);
  size_t left = sizeof(message);
  while (left > 0) {
    const ssize_t n = send(fd_, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the watchdog is gone; PDEATHSIG still holds
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Watchdog::Add(pid_t pgid) { Send(static_cast<int32_t>(pgid)); }

void Watchdog::Remove(pid_t pgid) { Send(-static_cast<int32_t>(pgid)); }

Watchdog::~Watchdog() {
  Send(0);
  close(fd_);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace tandem::train
