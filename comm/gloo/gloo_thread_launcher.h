// GlooThreadLauncher: a world of gloo ranks as threads of this process, each
// with its own TCP store client and GlooCommunicator over real TCP on
// localhost (a store server on a free port). For tests that need the gloo
// engine without tandemrun (split tests, the 2-D pipeline against sim):
//
//   GlooThreadLauncher launcher;
//   std::vector<RankStatus> statuses = launcher.Run(4, fn);
//
// Each Run connects a fresh world under its own store prefix. Ranks that
// fail leave their peers waiting until `timeout`, so keep it short in
// tests. Not thread-safe: one Run at a time.
#ifndef TANDEM_COMM_GLOO_GLOO_THREAD_LAUNCHER_H_
#define TANDEM_COMM_GLOO_GLOO_THREAD_LAUNCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm/launcher.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

class GlooThreadLauncher : public Launcher {
 public:
  explicit GlooThreadLauncher(absl::Duration timeout = absl::Seconds(60));
  ~GlooThreadLauncher() override;

  std::string name() const override { return "gloo-threads"; }
  // 1 to 16 ranks (threads, each with a few of Gloo's own).
  absl::Status CanRun(int world_size) const override;
  // Every rank's status, in rank order; a rank whose store connection or
  // Create failed reports that error.
  std::vector<RankStatus> Run(int world_size, const RankFn& fn) override;

 private:
  absl::Duration timeout_;
  std::unique_ptr<TcpStoreServer> server_;  // started by the first Run
  int64_t runs_ = 0;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_GLOO_GLOO_THREAD_LAUNCHER_H_
