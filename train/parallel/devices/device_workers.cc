#include "train/parallel/devices/device_workers.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::train {

absl::StatusOr<std::unique_ptr<DeviceWorkers>> DeviceWorkers::Create(
    std::vector<Device> devices) {
  if (devices.empty()) {
    return absl::InvalidArgumentError(
        "DeviceWorkers needs at least one device");
  }
  return std::unique_ptr<DeviceWorkers>(new DeviceWorkers(std::move(devices)));
}

DeviceWorkers::DeviceWorkers(std::vector<Device> devices)
    : devices_(std::move(devices)) {
  tasks_.resize(devices_.size());
  results_.resize(devices_.size());
  done_.assign(devices_.size(), true);
  threads_.reserve(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    threads_.emplace_back([this, i] { Loop(i); });
  }
}

DeviceWorkers::~DeviceWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void DeviceWorkers::Loop(size_t index) {
  int64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Woken by Run (new generation) or the destructor; no timeout needed:
    // the destructor always sets stop_ and notifies.
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    Task task = std::move(tasks_[index]);
    tasks_[index] = nullptr;
    lock.unlock();
    absl::Status status = task ? task() : absl::OkStatus();
    task = nullptr;  // release captures before reporting
    lock.lock();
    results_[index] = std::move(status);
    done_[index] = true;
    cv_.notify_all();
  }
}

absl::Status DeviceWorkers::Run(std::vector<Task> tasks,
                                absl::Duration timeout) {
  if (tasks.size() > devices_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceWorkers::Run: ", tasks.size(), " tasks for ",
                     devices_.size(), " workers"));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (poisoned_) {
    return absl::FailedPreconditionError(
        "the device workers timed out earlier and may still be running that "
        "work; create a new wrapper");
  }
  tasks.resize(devices_.size());
  for (size_t i = 0; i < devices_.size(); ++i) {
    tasks_[i] = std::move(tasks[i]);
    results_[i] = absl::OkStatus();
    done_[i] = false;
  }
  ++generation_;
  cv_.notify_all();
  auto all_done = [&] {
    for (bool d : done_) {
      if (!d) return false;
    }
    return true;
  };
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
  if (!cv_.wait_until(lock, deadline, all_done)) {
    poisoned_ = true;
    std::vector<std::string> busy;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (!done_[i]) busy.push_back(devices_[i].ToString());
    }
    return absl::DeadlineExceededError(
        absl::StrCat("the work on ", absl::StrJoin(busy, ", "),
                     " did not finish within ", absl::FormatDuration(timeout),
                     "; raise the timeout if the model is that slow"));
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (!results_[i].ok()) {
      return absl::Status(results_[i].code(),
                          absl::StrCat("on ", devices_[i].ToString(), ": ",
                                       results_[i].message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
