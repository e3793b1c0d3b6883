// Per-rank lines that read the same at every world size. The DDP tutorials
// print "[GPUk] ..." on every rank; in the virtual world (virtual_world.h)
// rank k is a virtual rank, played by whichever real rank holds it, so its
// lines are kept and rank 0 prints them all, virtual rank by virtual rank,
// at each Flush: the output is the same for every W that plays K.
//
//   VirtualRankPrinter out(comm, device, strategy.virtual_world());
//   for (each virtual rank k this rank plays) out.PrintOnRank(k, "loss 0.5");
//   TANDEM_RETURN_IF_ERROR(out.Flush());   // collective when on
//
// Off (K = 0) it is comm::RankPrinter: PrintOnRank(comm.rank(), text) prints
// at once, Flush does nothing. One per rank; its thread only; the
// communicator outlives it.
#ifndef TANDEM_TRAIN_LOOP_VIRTUAL_RANK_PRINTER_H_
#define TANDEM_TRAIN_LOOP_VIRTUAL_RANK_PRINTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/rank_printer.h"
#include "tensor/device.h"
#include "train/parallel/core/virtual_world.h"

namespace tandem::train {

class VirtualRankPrinter {
 public:
  VirtualRankPrinter(comm::Communicator& comm, Device device, VirtualWorld vw);

  // `text`'s lines as rank `rank`'s, each "[GPU<rank>] "-prefixed: printed
  // now when the virtual world is off (`rank` is then this rank), kept for
  // Flush when it is on (`rank` one of the virtual ranks this rank plays;
  // another is an InvalidArgument naming it).
  absl::Status PrintOnRank(int64_t rank, std::string_view text);
  // `text` unchanged on rank 0 (comm::RankPrinter::PrintOnRank0), at once.
  void PrintOnRank0(std::string_view text) const;
  // On: collective; rank 0 prints every rank's kept lines in virtual-rank
  // order (a virtual rank's own lines in the order given) and the kept
  // lines are dropped. Off: OK, nothing.
  absl::Status Flush();

  const VirtualWorld& virtual_world() const { return vw_; }

 private:
  comm::Communicator& comm_;
  Device device_;
  VirtualWorld vw_;
  comm::RankPrinter printer_;
  std::vector<std::string> kept_;  // per local virtual rank, prefixed lines
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_VIRTUAL_RANK_PRINTER_H_
