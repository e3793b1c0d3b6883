// One worker thread per device, for single-process multi-device wrappers
// (DataParallel's replicas, Pipe's stages): Run hands task i to worker i,
// runs them concurrently and waits, bounded by a timeout, for all of them.
//
//   TANDEM_ASSIGN_OR_RETURN(auto workers,
//                           DeviceWorkers::Create({Device::Sim(0),
//                                                  Device::Sim(1)}));
//   TANDEM_RETURN_IF_ERROR(workers->Run({task0, task1}, absl::Seconds(60)));
//
// Contract:
//   - Run(tasks): tasks.size() <= number of workers; a null task leaves its
//     worker idle. Blocks until every task returned or the timeout passed.
//     Returns OK, or the error of the lowest-numbered failing task prefixed
//     with its device ("on sim:1: ..."), or DeadlineExceeded naming the
//     devices still busy. After a timeout the workers are poisoned: later
//     Runs fail at once (FailedPrecondition), since a task may still hold
//     the caller's state.
//   - Threads: started by Create, joined by the destructor (which waits for
//     a task that outlived its timeout; tasks are finite computations). Not
//     detached. A task runs on its worker's thread with grad mode as the
//     thread's default (on); tasks must not share mutable state except
//     through what Run's completion orders (Run happens-after every task).
//   - Run is called from one thread at a time (the wrapper's owner).
#ifndef TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_WORKERS_H_
#define TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_WORKERS_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensor/device.h"

namespace tandem::train {

class DeviceWorkers {
 public:
  using Task = std::function<absl::Status()>;

  // One worker per entry of `devices` (at least one).
  static absl::StatusOr<std::unique_ptr<DeviceWorkers>> Create(
      std::vector<Device> devices);
  ~DeviceWorkers();
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  absl::Status Run(std::vector<Task> tasks, absl::Duration timeout);

  int64_t size() const { return static_cast<int64_t>(devices_.size()); }

 private:
  explicit DeviceWorkers(std::vector<Device> devices);
  void Loop(size_t index);

  const std::vector<Device> devices_;
  std::mutex mu_;
  std::condition_variable cv_;  // signals new work, results and shutdown
  // Bumped by Run; a worker runs tasks_[i] once per generation.
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> results_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool poisoned_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DEVICES_DEVICE_WORKERS_H_
