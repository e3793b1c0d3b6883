// RankPrinter: rank-aware printing, the two ways the DDP tutorials print.
//
//   comm::RankPrinter out(comm);
//   out.PrintOnRank0(absl::StrFormat("epoch %d loss %.4f", epoch, loss));
//   out.PrintOnAllRanks("finished");   // "[GPU3] finished" on rank 3
//
// Output goes to the communicator's line sink (stdout for real backends, a
// per-rank capture under sim when asked). Text with several lines is split;
// each line is written atomically, so lines from different ranks never
// interleave mid-line. Thread-safe as the sink is; cheap to construct.
#ifndef TANDEM_COMM_RANK_PRINTER_H_
#define TANDEM_COMM_RANK_PRINTER_H_

#include <string>
#include <string_view>

#include "comm/communicator.h"
#include "comm/line_sink.h"

namespace tandem::comm {

// The name a rank goes by in output and thread names: "GPU3".
std::string RankName(int rank);

class RankPrinter {
 public:
  // Prints for `comm.rank()` into `comm.output()`; `comm` must outlive this.
  explicit RankPrinter(const Communicator& comm);
  // Prints for `rank` into `sink`; `sink` must outlive this.
  RankPrinter(int rank, LineSink& sink);

  int rank() const { return rank_; }

  // Prints `text` unchanged, one line per '\n'-separated line, on rank 0;
  // does nothing on the other ranks.
  void PrintOnRank0(std::string_view text) const;

  // Prints `text` on every rank, each line prefixed with "[GPU<rank>] ".
  void PrintOnAllRanks(std::string_view text) const;

 private:
  void WriteLines(std::string_view prefix, std::string_view text) const;

  int rank_;
  LineSink* sink_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_RANK_PRINTER_H_
