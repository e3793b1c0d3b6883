#include "train/launch/line_forwarder.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/std_streams.h"

namespace tandem::train {

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Our stream is gone: the exit code says so (base/std_streams.h).
      tandem::base::NoteStdStreamError(fd, n < 0 ? errno : EIO);
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

LineForwarder::LineForwarder(int out_fd, int keep_lines, size_t max_line)
    : out_fd_(out_fd),
      keep_lines_(static_cast<size_t>(std::max(keep_lines, 1))),
      max_line_(std::max<size_t>(max_line, 1)) {}

void LineForwarder::Feed(std::string_view data) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const bool ends = nl != std::string_view::npos;
    const std::string_view piece = data.substr(0, ends ? nl + 1 : data.size());
    data.remove_prefix(piece.size());
    if (overflowed_) {
      WriteAll(out_fd_, piece);
      line_bytes_ += static_cast<int64_t>(piece.size() - (ends ? 1 : 0));
      if (ends) EndLine();
      continue;
    }
    partial_.append(piece);
    if (ends) {
      WriteAll(out_fd_, partial_);
      EndLine();
    } else if (partial_.size() > max_line_) {
      // Too long to hold back: out with it, and the rest as it comes.
      WriteAll(out_fd_, partial_);
      overflowed_ = true;
      line_bytes_ = static_cast<int64_t>(partial_.size());
      partial_.resize(max_line_);
    }
  }
}

void LineForwarder::Finish() {
  if (!overflowed_ && partial_.empty()) return;
  if (!overflowed_) WriteAll(out_fd_, partial_);
  WriteAll(out_fd_, "\n");
  EndLine();
}

void LineForwarder::EndLine() {
  std::string line = std::move(partial_);
  partial_.clear();
  if (!line.empty() && line.back() == '\n') line.pop_back();
  if (overflowed_) {
    absl::StrAppend(&line, " [... line of ", line_bytes_, " bytes, the first ",
                    line.size(), " kept]");
  }
  overflowed_ = false;
  line_bytes_ = 0;
  tail_.push_back(std::move(line));
  while (tail_.size() > keep_lines_) tail_.pop_front();
}

}  // namespace tandem::train
