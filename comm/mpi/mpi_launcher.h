// MpiLauncher: the MPI engine behind the comm::Launcher interface, used by the
// conformance suite (comm/conformance) and the launch registry
// (train/launch/registry.h). The binary is started by `mpirun -np N`; each
// process is one rank, so Run() hosts exactly one rank: its own.
//
//   std::shared_ptr<comm::MpiLauncher> launcher =
//       std::make_shared<comm::MpiLauncher>();
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(Mpi, launcher, SuiteOptions());
//   int main(...) { ...; int rc = RUN_ALL_TESTS(); launcher->Shutdown(); }
//
// The world size is known before MPI starts, from mpirun's environment
// (comm/launch_env.h), so CanRun() can refuse other sizes while
// gtest is still listing tests. MPI itself is initialised by the first Run()
// and finalised by Shutdown(); every test reuses the one communicator.
// Not thread-safe: gtest calls it from the main thread only.
#ifndef TANDEM_COMM_MPI_MPI_LAUNCHER_H_
#define TANDEM_COMM_MPI_MPI_LAUNCHER_H_

#include <memory>
#include <string>
#include <vector>

#include "comm/launcher.h"
#include "comm/mpi/mpi_communicator.h"

namespace tandem::comm {

class MpiLauncher : public Launcher {
 public:
  // `options` for the communicator created by the first Run().
  explicit MpiLauncher(MpiOptions options = {.timeout = absl::Seconds(120)});

  std::string name() const override { return "mpi"; }
  // OK only for the size mpirun started (OMPI_COMM_WORLD_SIZE etc.); 1
  // when the binary runs without a launcher. FailedPrecondition otherwise,
  // saying how to start the job.
  absl::Status CanRun(int world_size) const override;
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

  // Destroys the communicator (MPI_Finalize). Call once, after the tests.
  void Shutdown() { comm_.reset(); }

 private:
  MpiOptions options_;
  int launch_size_ = 1;
  std::unique_ptr<MpiCommunicator> comm_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_MPI_MPI_LAUNCHER_H_
