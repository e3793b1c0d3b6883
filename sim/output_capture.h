// OutputCapture: keeps what each simulated rank printed, per rank, so a test
// can assert who printed what (e.g. that only rank 0 printed the loss).
//
//   sim::OutputCapture capture;
//   sim::Options options;
//   options.capture = &capture;
//   sim::Run(4, [](int rank, comm::Communicator& comm) {
//     comm::RankPrinter(comm).PrintOnRank0("epoch 0");
//     comm::RankPrinter(comm).PrintOnAllRanks("done");
//     return absl::OkStatus();
//   }, options);
//   capture.Lines(0);   // {"epoch 0", "[GPU0] done"}
//   capture.Lines(3);   // {"[GPU3] done"}
//
// Thread-safe: ranks write concurrently; readers may read at any time. Lines
// are whole (comm::LineSink is line-atomic).
#ifndef TANDEM_SIM_OUTPUT_CAPTURE_H_
#define TANDEM_SIM_OUTPUT_CAPTURE_H_

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "comm/line_sink.h"

namespace tandem::sim {

class OutputCapture {
 public:
  struct Line {
    int rank = 0;
    std::string text;
  };

  OutputCapture();
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  // Clears everything and prepares one sink per rank. sim::Run calls this.
  void Reset(int world_size);
  int world_size() const;

  // Also write every captured line to stdout (default: off).
  void set_echo(bool echo);

  // The sink of `rank` (0 <= rank < world_size()); valid until the next
  // Reset() or destruction.
  comm::LineSink& sink(int rank);

  // `rank`'s lines in the order written (empty for an unknown rank).
  std::vector<std::string> Lines(int rank) const;
  // Every rank's lines in the order they were written.
  std::vector<Line> AllLines() const;

 private:
  class RankSink;
  void Append(int rank, std::string_view text);

  mutable std::mutex mu_;
  bool echo_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<RankSink>> sinks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> per_rank_ ABSL_GUARDED_BY(mu_);
  std::vector<Line> all_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::sim

#endif  // TANDEM_SIM_OUTPUT_CAPTURE_H_
