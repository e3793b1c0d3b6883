// LineSink: where a rank's printed lines go.
//
// A line is the unit of output: a sink writes each line whole, so lines from
// different threads (ranks) never interleave mid-line. Real backends print to
// stdout; the simulated cluster gives each rank its own capturing sink so a
// test can assert who printed what (see sim/output_capture.h). Ranks print
// through RankPrinter (comm/rank_printer.h), which gets the sink from
// Communicator::output().
//
//   comm::CapturedLines lines;
//   lines.WriteLine("hello");
//   EXPECT_THAT(lines.Lines(), ElementsAre("hello"));
#ifndef TANDEM_COMM_LINE_SINK_H_
#define TANDEM_COMM_LINE_SINK_H_

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace tandem::comm {

class LineSink {
 public:
  virtual ~LineSink() = default;
  // Writes `line` (no trailing newline; one is added) as one atomic unit.
  // Thread-safe. `line` should not contain '\n'; RankPrinter splits text into
  // lines before it gets here.
  virtual void WriteLine(std::string_view line) = 0;
};

// The process's stdout, line-atomic under a process-wide mutex, flushed after
// every line (so a crash loses nothing and lines keep their order with other
// output). Lives for the whole process.
LineSink& StdoutLineSink();

// Keeps every line in memory, in the order written. Thread-safe.
class CapturedLines : public LineSink {
 public:
  void WriteLine(std::string_view line) override;
  std::vector<std::string> Lines() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_LINE_SINK_H_
