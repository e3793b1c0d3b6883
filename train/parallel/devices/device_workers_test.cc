#include "train/parallel/devices/device_workers.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::train {
namespace {

std::vector<Device> Devices(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::Sim(i));
  return d;
}

// All tasks run at the same time: each waits (bounded) until every other
// one has started, which only concurrent workers can satisfy.
TEST(DeviceWorkersTest, RunsTasksConcurrently) {
  auto workers = DeviceWorkers::Create(Devices(3)).value();
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  std::vector<DeviceWorkers::Task> tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.push_back([&]() -> absl::Status {
      std::unique_lock<std::mutex> lock(mu);
      ++started;
      cv.notify_all();
      if (!cv.wait_for(lock, std::chrono::seconds(30),
                       [&] { return started == 3; })) {
        return absl::DeadlineExceededError("not concurrent");
      }
      return absl::OkStatus();
    });
  }
  EXPECT_TRUE(workers->Run(std::move(tasks), absl::Seconds(60)).ok());
  // Reusable: a second round with an idle worker (null task).
  std::atomic<int> ran{0};
  std::vector<DeviceWorkers::Task> again = {[&] {
                                              ++ran;
                                              return absl::OkStatus();
                                            },
                                            nullptr};
  EXPECT_TRUE(workers->Run(std::move(again), absl::Seconds(60)).ok());
  EXPECT_EQ(ran.load(), 1);
}

TEST(DeviceWorkersTest, ReturnsTheLowestFailingDevicesError) {
  auto workers = DeviceWorkers::Create(Devices(3)).value();
  std::vector<DeviceWorkers::Task> tasks = {
      [] { return absl::OkStatus(); },
      [] { return absl::InvalidArgumentError("bad shape"); },
      [] { return absl::InternalError("later"); }};
  absl::Status s = workers->Run(std::move(tasks), absl::Seconds(60));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "on sim:1: bad shape");
}

TEST(DeviceWorkersTest, TimeoutNamesTheBusyDeviceAndPoisons) {
  // Declared before the workers: the destructor joins the worker that
  // still waits on them.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  auto workers = DeviceWorkers::Create(Devices(2)).value();
  std::vector<DeviceWorkers::Task> tasks = {
      [] { return absl::OkStatus(); },
      [&]() -> absl::Status {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
        return absl::OkStatus();
      }};
  absl::Status s = workers->Run(std::move(tasks), absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("the work on sim:1 did not finish"),
            std::string::npos)
      << s;
  EXPECT_EQ(workers->Run({}, absl::Seconds(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();  // the destructor joins the released worker
}

TEST(DeviceWorkersTest, TooManyTasksOrNoDevices) {
  EXPECT_FALSE(DeviceWorkers::Create({}).ok());
  auto workers = DeviceWorkers::Create(Devices(1)).value();
  std::vector<DeviceWorkers::Task> tasks(2);
  EXPECT_EQ(workers->Run(std::move(tasks), absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
