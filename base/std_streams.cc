#include "base/std_streams.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace tandem::base {
namespace {

// errno of the first failed raw write to stdout / stderr; 0: none.
std::atomic<int> g_raw_error[2] = {0, 0};

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

// Writes `text` to `stream` and flushes it; false when that failed.
bool Say(std::FILE* stream, const std::string& text) {
  return std::fputs(text.c_str(), stream) >= 0 && std::fflush(stream) == 0;
}

const char* StreamName(int fd) {
  return fd == STDOUT_FILENO ? "the standard output" : "the standard error";
}

}  // namespace

std::optional<int> RefuseClosedStdStreams(std::string_view program) {
  const bool out_open = IsOpen(STDOUT_FILENO);
  const bool err_open = IsOpen(STDERR_FILENO);
  if (out_open && err_open) return std::nullopt;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (IsOpen(fd)) continue;
    // Hold the number so that no file the program opens lands on it.
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
  const std::string closed = !out_open && !err_open
                                 ? "the standard output and error are"
                             : !out_open ? "the standard output is"
                                         : "the standard error is";
  const std::string message =
      std::string(program) + ": " + closed +
      " closed, so what the run prints would be lost; redirect it to a file "
      "or to /dev/null instead of closing it\n";
  if (err_open) {
    Say(stderr, message);
  } else if (out_open) {
    Say(stdout, message);
  }
  return 1;
}

void NoteStdStreamError(int fd, int err) {
  if (fd != STDOUT_FILENO && fd != STDERR_FILENO) return;
  int expected = 0;
  g_raw_error[fd - 1].compare_exchange_strong(expected, err != 0 ? err : EIO);
}

int FinishStdStreams(std::string_view program, int exit_code) {
  // Per stream: whether it lost output, and errno when known (0: an earlier
  // buffered write failed and stdio kept only its error flag).
  bool lost[2] = {false, false};
  int error[2] = {0, 0};
  std::FILE* streams[2] = {stdout, stderr};
  for (int i = 0; i < 2; ++i) {
    errno = 0;
    const bool flushed = std::fflush(streams[i]) == 0;
    if (!flushed) error[i] = errno;
    if (error[i] == 0) error[i] = g_raw_error[i].load();
    lost[i] = !flushed || std::ferror(streams[i]) != 0 || error[i] != 0;
  }
  if (!lost[0] && !lost[1]) return exit_code;
  for (int i = 0; i < 2; ++i) {
    if (!lost[i] || lost[1 - i]) continue;  // said on the other stream only
    const std::string why =
        error[i] != 0 ? std::string(": ") + std::strerror(error[i]) : "";
    Say(streams[1 - i],
        std::string(program) + ": writing " + StreamName(i + 1) + " failed" +
            why +
            "; the run's output is lost (a full disk, /dev/full, a closed "
            "reader?)\n");
  }
  return exit_code == 0 ? 1 : exit_code;
}

}  // namespace tandem::base
