// Lost output is an error: a binary whose standard output or error cannot be
// written (`prog > /dev/full`, a full disk, `prog >&-`) exits 1 saying so on
// whichever stream still works, as `cat` and `python` do, instead of exit 0
// with the results gone.
//
//   int main(int argc, char** argv) {
//     if (std::optional<int> code = base::RefuseClosedStdStreams("toy_ddp"))
//       return *code;                     // before anything opens a file
//     int code = Run(...);
//     return base::FinishStdStreams("toy_ddp", code);
//   }
//
// Writes that bypass stdio (write(2) on STDOUT_FILENO/STDERR_FILENO) report
// their failures through NoteStdStreamError so that FinishStdStreams counts
// them too. Thread-safe (one atomic per stream).
#ifndef TANDEM_BASE_STD_STREAMS_H_
#define TANDEM_BASE_STD_STREAMS_H_

#include <optional>
#include <string_view>

namespace tandem::base {

// When descriptor 1 or 2 is closed (`>&-`, `2>&-`): the file the program
// opens next would take its number and receive what it prints (a
// checkpoint, a trace). Puts /dev/null on the closed descriptor, says so on
// the other stream (when open) and returns 1 (a runtime error), before any
// work; nullopt when both are open.
std::optional<int> RefuseClosedStdStreams(std::string_view program);

// Records that a raw write to `fd` (STDOUT_FILENO or STDERR_FILENO) failed
// with errno `err`; other descriptors are ignored.
void NoteStdStreamError(int fd, int err);

// At exit: flushes stdout and stderr and checks their error flags and the
// failures noted above. When a stream lost output, says so on the other
// stream ("<program>: writing the standard output failed: No space left on
// device; the run's output is lost ...", without the reason when stdio kept
// only its error flag) and returns 1 if `exit_code` was 0; otherwise
// returns `exit_code`.
int FinishStdStreams(std::string_view program, int exit_code);

}  // namespace tandem::base

#endif  // TANDEM_BASE_STD_STREAMS_H_
