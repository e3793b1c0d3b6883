#include "comm/nccl/local_gpus.h"

#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/launcher.h"
#include "comm/nccl/abort_signal.h"
#include "comm/nccl/cuda_probe.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/validate.h"

namespace tandem::comm {
namespace {

std::string VisibleDevicesText() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  return env == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                        : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", env, "\"");
}

// Runs body(r) for r in [0, n) on n threads and joins them. If a thread
// cannot be started, the ones started are told to stop through `signal`
// and joined; the error is returned.
absl::Status OnThreads(int n, AbortSignal& signal,
                       const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  absl::Status started;
  for (int r = 0; r < n; ++r) {
    try {
      threads.emplace_back(body, r);
    } catch (const std::system_error& e) {
      started = absl::ResourceExhaustedError(absl::StrCat(
          "could not start the thread of rank ", r, ": ", e.what()));
      signal.Raise(r, started);
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  return started;
}

absl::Status RunRank(const LocalGpuFn& fn, int rank, NcclCommunicator& comm) {
  try {
    return fn(rank, comm);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("nccl: rank ", rank, " threw an exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat("nccl: rank ", rank,
                     " threw an exception not derived from std::exception"));
  }
}

}  // namespace

bool LocalRunResult::ok() const { return status().ok(); }

absl::Status LocalRunResult::status() const {
  if (!launch.ok()) return launch;
  std::vector<RankStatus> statuses;
  statuses.reserve(ranks.size());
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    statuses.push_back({r, ranks[r]});
  }
  return MostTellingStatus(statuses);
}

int LocalGpuCount() {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  return probe.ok() ? probe->device_count : 0;
}

absl::StatusOr<std::unique_ptr<LocalGpuWorld>> LocalGpuWorld::Create(
    int world_size, const NcclOptions& options) {
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  TANDEM_ASSIGN_OR_RETURN(CudaProbe probe, ProbeCuda());
  if (probe.device_count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RunOnLocalGpus(", world_size,
        " ranks): no GPU to run on: ", probe.no_device_reason,
        ". Use the sim backend (sim::Run) on machines without GPUs"));
  }
  if (world_size > probe.device_count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RunOnLocalGpus: world size ", world_size, " needs ", world_size,
        " GPUs (one per rank) but this process sees ", probe.device_count, " (",
        VisibleDevicesText(), "); ask for at most ", probe.device_count,
        " ranks, or run one process per GPU over MPI"));
  }
  TANDEM_ASSIGN_OR_RETURN(NcclUniqueId id, NcclCommunicator::NewUniqueId());
  // NCCL's init is collective: every rank must be inside Create at once.
  auto signal = std::make_shared<AbortSignal>();
  NcclOptions rank_options = options;
  rank_options.abort_signal = signal;
  std::vector<std::unique_ptr<NcclCommunicator>> comms(world_size);
  std::vector<absl::Status> made(world_size);
  TANDEM_RETURN_IF_ERROR(OnThreads(world_size, *signal, [&](int r) {
    absl::StatusOr<std::unique_ptr<NcclCommunicator>> c =
        NcclCommunicator::Create(id, r, world_size, /*device=*/r, rank_options);
    if (c.ok()) {
      comms[r] = *std::move(c);
    } else {
      made[r] = c.status();
      signal->Raise(r, made[r]);  // the others stop waiting for this rank
    }
  }));
  LocalRunResult init;
  init.ranks = made;
  if (absl::Status s = init.status(); !s.ok()) {
    // `comms` (the ranks that did join) are destroyed, in parallel, by the
    // world's destructor below; they are aborted already via the signal.
    LocalGpuWorld partial(std::move(comms));
    return absl::Status(s.code(), absl::StrCat("RunOnLocalGpus: creating the "
                                               "NCCL communicators failed: ",
                                               s.message()));
  }
  for (auto& c : comms) c->set_abort_signal(nullptr);
  return std::unique_ptr<LocalGpuWorld>(new LocalGpuWorld(std::move(comms)));
}

LocalGpuWorld::LocalGpuWorld(
    std::vector<std::unique_ptr<NcclCommunicator>> comms)
    : comms_(std::move(comms)) {}

LocalGpuWorld::~LocalGpuWorld() {
  AbortSignal unused;
  (void)OnThreads(static_cast<int>(comms_.size()), unused,
                  [&](int r) { comms_[r].reset(); });
  // Threads that could not start leave their communicators to this thread.
  for (auto& c : comms_) c.reset();
}

bool LocalGpuWorld::healthy() const {
  for (const auto& c : comms_) {
    if (c == nullptr || c->aborted()) return false;
  }
  return true;
}

LocalRunResult LocalGpuWorld::Run(const LocalGpuFn& fn) {
  LocalRunResult result;
  if (!healthy()) {
    result.launch = absl::FailedPreconditionError(
        "LocalGpuWorld::Run: a communicator of this world was aborted by an "
        "earlier failure; create a new world");
    return result;
  }
  const int n = world_size();
  auto signal = std::make_shared<AbortSignal>();
  for (auto& c : comms_) c->set_abort_signal(signal);
  result.ranks.assign(n, absl::OkStatus());
  result.launch = OnThreads(n, *signal, [&](int r) {
    NcclCommunicator& comm = *comms_[r];
    absl::Status s = comm.MakeDeviceCurrent();
    if (s.ok()) s = RunRank(fn, r, comm);
    if (s.ok()) {
      // Whatever the rank left in flight must finish before its buffers
      // (owned by the function) are gone and before the next run.
      s = comm.Synchronize();
    }
    if (!s.ok()) {
      signal->Raise(r, s);  // peers stop waiting for this rank
      // Its own kernels may wait for peers that are about to abort: stop
      // them too, so nothing is left running on this GPU.
      comm.Abort(s);
    }
    result.ranks[r] = std::move(s);
  });
  for (auto& c : comms_) c->set_abort_signal(nullptr);
  return result;
}

LocalRunResult RunOnLocalGpus(int world_size, const LocalGpuFn& fn,
                              const NcclOptions& options) {
  LocalRunResult result;
  absl::StatusOr<std::unique_ptr<LocalGpuWorld>> world =
      LocalGpuWorld::Create(world_size, options);
  if (!world.ok()) {
    result.launch = world.status();
    return result;
  }
  return (*world)->Run(fn);
}

}  // namespace tandem::comm
