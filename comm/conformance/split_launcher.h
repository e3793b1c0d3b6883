// SplitLauncher: runs the conformance suite on sub-communicators
// (Communicator::Split). A world of n ranks is made by starting 2n ranks
// with the wrapped launcher and splitting them by parity: the even ranks
// form one n-rank communicator and the odd ranks another, each ordered by
// descending parent rank (key = -rank, so the key, not the parent order,
// decides the sub-ranks). Both halves run the test function at the same
// time, so the suite also checks that two sub-communicators of one parent
// never mix their operations.
//
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(
//       SimSplit,
//       std::make_shared<comm::conformance::SplitLauncher>(
//           std::make_shared<sim::SimLauncher>()),
//       options);
//
// Under mpirun -np 4 only n = 2 can run (CanRun asks the wrapped launcher
// for 2n). Thread-safety: as the wrapped launcher.
#ifndef TANDEM_COMM_CONFORMANCE_SPLIT_LAUNCHER_H_
#define TANDEM_COMM_CONFORMANCE_SPLIT_LAUNCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/launcher.h"

namespace tandem::comm::conformance {

class SplitLauncher : public Launcher {
 public:
  explicit SplitLauncher(std::shared_ptr<Launcher> parent);

  // "<parent>-split".
  std::string name() const override;
  // The wrapped launcher's verdict on 2 x world_size ranks.
  absl::Status CanRun(int world_size) const override;
  // Statuses of the parent ranks this process hosts (their parent rank
  // numbers); a failed Split is that rank's status.
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

 private:
  std::shared_ptr<Launcher> parent_;
};

}  // namespace tandem::comm::conformance

#endif  // TANDEM_COMM_CONFORMANCE_SPLIT_LAUNCHER_H_
