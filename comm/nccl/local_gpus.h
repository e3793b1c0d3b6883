// One process driving every visible GPU with NCCL, one thread per GPU: the
// GPU twin of sim::Run (and of torch.multiprocessing.spawn with one process
// per GPU, except that the ranks are threads).
//
//   comm::LocalRunResult result = comm::RunOnLocalGpus(
//       /*world_size=*/4, [](int rank, comm::NcclCommunicator& comm)
//                              -> absl::Status {
//         // this thread's current device is comm.device() ==
//         CommDevice::Cuda(rank)
//         ... allocate on the device, comm.AllReduce(...)->Wait() ...
//         return absl::OkStatus();
//       });
//   TANDEM_RETURN_IF_ERROR(result.status());
//
// Rank r drives CUDA device r, an ordinal among the devices this process
// sees, so CUDA_VISIBLE_DEVICES="2,3" runs ranks 0 and 1 on physical GPUs 2
// and 3. A function taking `comm::Communicator&` works too.
//
// Failure handling, as sim::Run: a rank whose function returns an error or
// throws raises the run's AbortSignal; every other rank's pending and later
// operations then abort their NCCL communicator and fail with kAborted
// naming that rank, instead of waiting for a peer that will never come; the
// failed rank's own communicator is aborted as well (a LocalGpuWorld is then
// unhealthy and must be recreated).
// When a rank's function returns OK, the rank waits (bounded by the timeout)
// until its GPU has finished every operation it issued; a rank that returns
// while its peers still wait for it makes them fail at their timeout.
//
// Without a GPU (or built without CUDA) nothing runs: the result's `launch`
// is kFailedPrecondition saying why.
#ifndef TANDEM_COMM_NCCL_LOCAL_GPUS_H_
#define TANDEM_COMM_NCCL_LOCAL_GPUS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/nccl/nccl_communicator.h"

namespace tandem::comm {

// What every rank runs. The communicator is valid during the call only.
using LocalGpuFn =
    std::function<absl::Status(int rank, NcclCommunicator& comm)>;

struct LocalRunResult {
  // Why the run could not start (no device, bad world size, NCCL init); OK
  // if every rank ran.
  absl::Status launch;
  // What each rank's function returned, in rank order (then the result of
  // draining its GPU). An exception becomes kInternal naming it.
  std::vector<absl::Status> ranks;

  bool ok() const;
  // OK, the launch error, or the most telling rank error prefixed with its
  // rank: the first that is not kAborted (the cause), else the first.
  absl::Status status() const;
};

// How many CUDA devices this process sees (0 without a driver, a device, or
// a CUDA build). Never fails for "no GPU".
int LocalGpuCount();

// A world of `world_size` ranks on the local GPUs whose communicators live
// across runs, so that many short runs (a test suite) pay NCCL's
// initialisation once. Not thread-safe: one Run at a time.
class LocalGpuWorld {
 public:
  // Creates every rank's communicator, concurrently, one thread per device
  // (bounded by options.timeout). kFailedPrecondition when the process sees
  // fewer than world_size devices (the message names CUDA_VISIBLE_DEVICES).
  static absl::StatusOr<std::unique_ptr<LocalGpuWorld>> Create(
      int world_size, const NcclOptions& options = {});

  // Destroys the communicators, each on its own thread (NCCL finalises them
  // together).
  ~LocalGpuWorld();
  LocalGpuWorld(const LocalGpuWorld&) = delete;
  LocalGpuWorld& operator=(const LocalGpuWorld&) = delete;

  int world_size() const { return static_cast<int>(comms_.size()); }
  // False once any communicator was aborted (a failed run): create a new
  // world.
  bool healthy() const;

  // Runs fn(rank, comm) on one thread per rank with that rank's device
  // current; returns when every rank has returned and drained its GPU.
  LocalRunResult Run(const LocalGpuFn& fn);

 private:
  explicit LocalGpuWorld(std::vector<std::unique_ptr<NcclCommunicator>> comms);

  std::vector<std::unique_ptr<NcclCommunicator>> comms_;
};

// LocalGpuWorld::Create + Run + destroy.
LocalRunResult RunOnLocalGpus(int world_size, const LocalGpuFn& fn,
                              const NcclOptions& options = {});

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_LOCAL_GPUS_H_
