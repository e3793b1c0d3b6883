// GlooLauncher: the gloo engine behind the comm::Launcher interface, for the
// conformance suite and the launch registry (train/launch/registry.h). The
// binary is started by tandemrun (or torchrun, or by hand with the same
// variables): each process is one rank, told by RANK and WORLD_SIZE, and the
// ranks meet at the TCP store at MASTER_ADDR:MASTER_PORT.
//
//   auto launcher = std::make_shared<comm::GlooLauncher>();
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(Gloo, launcher, SuiteOptions());
//   int main(...) { ...; int rc = RUN_ALL_TESTS(); launcher->Shutdown(); }
//
// The store: tandemrun hosts it and says so (TORCHELASTIC_USE_AGENT_STORE=
// True, as torchrun's agent does); otherwise rank 0 hosts it at MASTER_PORT,
// as c10d's init_process_group does. The first Run() connects; later Runs
// reuse the communicator (one rendezvous per process). Not thread-safe:
// call from the main thread.
#ifndef TANDEM_COMM_GLOO_GLOO_LAUNCHER_H_
#define TANDEM_COMM_GLOO_GLOO_LAUNCHER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/launch_env.h"
#include "comm/launcher.h"
#include "comm/store/launch_store.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

class GlooLauncher : public Launcher {
 public:
  explicit GlooLauncher(absl::Duration timeout = absl::Seconds(120));
  // `lookup` replaces getenv (tests).
  GlooLauncher(absl::Duration timeout, const EnvLookup& lookup);

  std::string name() const override { return "gloo"; }
  // OK only for WORLD_SIZE from a torchrun-style environment with
  // MASTER_ADDR and MASTER_PORT; FailedPrecondition otherwise, saying how to
  // start the job (tandemrun --nproc_per_node=N -- PROGRAM).
  absl::Status CanRun(int world_size) const override;
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

  // Closes the communicator and the store. Call once, after the last Run.
  void Shutdown();

  // How often a stalled wait notes which ranks have not reached its
  // collective (GlooOptions::stall_note_interval; RunOptions' value under
  // the engine registry). It must be shorter than the timeout for a failed
  // collective to name the ranks that never arrived. Before the first Run.
  void set_stall_note_interval(absl::Duration interval) {
    stall_note_interval_ = interval;
  }

 private:
  absl::Status Connect();

  absl::Duration timeout_;
  absl::Duration stall_note_interval_ = absl::Seconds(30);
  absl::Status env_status_;  // why this process cannot run gloo, if it can't
  int rank_ = 0;
  int world_size_ = 1;
  std::string master_addr_;
  int master_port_ = 0;
  bool agent_store_ = false;  // tandemrun hosts the store
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
  std::unique_ptr<GlooCommunicator> comm_;
  absl::Status connect_status_;  // a failed first connect, repeated after
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_GLOO_GLOO_LAUNCHER_H_
