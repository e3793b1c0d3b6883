// Forwards a worker's stderr to tandemrun's, line by line, and keeps its
// last lines for the failure report.
//
// A line up to `max_line` bytes is written with one write (so the lines of
// several workers never interleave mid-line); a longer line is forwarded as
// its bytes come (it may interleave with another worker's), and only its
// first `max_line` bytes are kept. Time and memory are linear in the bytes
// fed, whatever the line lengths: every byte is written exactly once.
//
//   LineForwarder f(STDERR_FILENO, /*keep_lines=*/10);
//   f.Feed(chunk);  // as read from the pipe
//   f.Finish();     // at EOF: an unfinished line is ended with '\n'
//   std::vector<std::string> tail = f.Tail();
//
// Not thread-safe.
#ifndef TANDEM_TRAIN_LAUNCH_LINE_FORWARDER_H_
#define TANDEM_TRAIN_LAUNCH_LINE_FORWARDER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::train {

// Writes all of `data` to `fd`, retrying on EINTR; when the descriptor is
// gone it gives up and notes the error (base/std_streams.h), so that the
// launcher's exit code says its output was lost.
void WriteAll(int fd, std::string_view data);

class LineForwarder {
 public:
  static constexpr size_t kDefaultMaxLine = 64 * 1024;

  LineForwarder(int out_fd, int keep_lines, size_t max_line = kDefaultMaxLine);

  void Feed(std::string_view data);
  // Ends an unfinished last line (writes '\n').
  void Finish();
  // The last `keep_lines` lines, without their '\n'; a cut line ends with
  // " [... line of N bytes, the first M kept]".
  std::vector<std::string> Tail() const {
    return std::vector<std::string>(tail_.begin(), tail_.end());
  }

 private:
  void EndLine();

  int out_fd_;
  size_t keep_lines_;
  size_t max_line_;
  std::string partial_;      // the current line (its first max_line_ bytes)
  bool overflowed_ = false;  // the current line was longer: already written
  int64_t line_bytes_ = 0;   // bytes of the current line, when overflowed_
  std::deque<std::string> tail_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_LINE_FORWARDER_H_
