// The timeline of DDP steps (base/trace) on the simulated cluster: every
// event on a rank's track, per-module forward and backward, the optimizer
// step, and each gradient bucket's all-reduce from launch to completion:
// with overlap on, the first bucket goes out before backward ends; with it
// off, every bucket after.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

constexpr int kRanks = 2;
constexpr int kSteps = 2;
// Every parameter (4 weights, 4 biases) is over the 1 KiB caps or fills one:
// a bucket each.
constexpr int kBuckets = 8;

// Two steps of a 4-layer MLP with bucket caps of 1 KiB: several
// all-reduces per step.
absl::Status TrainSteps(comm::Communicator& comm, bool overlap) {
  trace::ScopedThreadRank rank(comm.rank());
  Generator gen(7);
  nn::Sequential model;
  TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(32, 64, gen)));
  TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(64, 64, gen)));
  TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(64, 64, gen)));
  TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(64, 10, gen)));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DistributedDataParallel> ddp,
      DistributedDataParallel::Create(model, comm,
                                      {.first_bucket_cap_bytes = 1024,
                                       .bucket_cap_bytes = 1024,
                                       .overlap = overlap}));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model.Parameters(), 0.1));
  std::vector<float> values(16 * 32);
  gen.Uniform(values.data(), 16 * 32, -1.f, 1.f);
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector(values, {16, 32}));
  for (int step = 0; step < kSteps; ++step) {
    TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor square, Mul(y, y));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(square));
    model.ZeroGrad();
    TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
    TANDEM_RETURN_IF_ERROR(sgd.Step());
    // The same all-reduces, counted from the Work records.
    const DistributedDataParallel::SyncStats& stats = ddp->last_sync_stats();
    int64_t bytes = 0;
    for (const DdpBucket& b : ddp->buckets()) bytes += b.flat.nbytes();
    if (stats.all_reduces != kBuckets || stats.bytes != bytes ||
        !(stats.all_reduce_seconds > 0) || !(stats.wait_seconds >= 0)) {
      return absl::InternalError(absl::StrCat(
          "sync stats: ", stats.all_reduces, " all-reduces of ", stats.bytes,
          " bytes (expected ", kBuckets, " of ", bytes, "), ",
          stats.all_reduce_seconds, " s, wait ", stats.wait_seconds, " s"));
    }
  }
  return absl::OkStatus();
}

std::vector<trace::Event> Traced(bool overlap) {
  trace::Stop();
  trace::Clear();
  trace::Start();
  const sim::RunResult result =
      sim::Run(kRanks, [overlap](int, comm::Communicator& comm) {
        return TrainSteps(comm, overlap);
      });
  trace::Stop();
  EXPECT_TRUE(result.ok()) << result.status();
  std::vector<trace::Event> events = trace::Snapshot();
  trace::Clear();
  return events;
}

int64_t End(const trace::Event& e) { return e.start_us + e.duration_us; }

// A Work whose engine also reports when "the device stream" ran it, as nccl's
// does: 5 us after issue, for 7 us (fixed, so the test knows the answer).
class DeviceTimedWork : public comm::Work {
 public:
  explicit DeviceTimedWork(std::unique_ptr<comm::Work> inner)
      : comm::Work(inner->record()), inner_(std::move(inner)) {}
  bool IsCompleted() override {
    const bool done = inner_->IsCompleted();
    if (done) Sync();
    return done;
  }
  absl::Status Wait(absl::Duration timeout) override {
    absl::Status s = inner_->Wait(timeout);
    if (inner_->record().completed()) Sync();
    return s;
  }

 private:
  void Sync() {
    comm::WorkRecord& r = mutable_record();
    r = inner_->record();
    r.device_start = r.start + absl::Microseconds(5);
    r.device_end = r.device_start + absl::Microseconds(7);
  }
  std::unique_ptr<comm::Work> inner_;
};

// The simulated communicator with device-timed all-reduces.
class DeviceTimedCommunicator : public comm::Communicator {
 public:
  explicit DeviceTimedCommunicator(comm::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  std::unique_ptr<comm::Work> AllReduce(comm::BufferView buf,
                                        comm::ReduceOp op) override {
    return std::make_unique<DeviceTimedWork>(inner_.AllReduce(buf, op));
  }
  std::unique_ptr<comm::Work> Broadcast(comm::BufferView buf,
                                        int root) override {
    return inner_.Broadcast(buf, root);
  }
  std::unique_ptr<comm::Work> AllGather(comm::BufferView send,
                                        comm::BufferView recv) override {
    return inner_.AllGather(send, recv);
  }
  std::unique_ptr<comm::Work> ReduceScatter(comm::BufferView send,
                                            comm::BufferView recv,
                                            comm::ReduceOp op) override {
    return inner_.ReduceScatter(send, recv, op);
  }
  std::unique_ptr<comm::Work> Send(comm::BufferView buf, int peer) override {
    return inner_.Send(buf, peer);
  }
  std::unique_ptr<comm::Work> Recv(comm::BufferView buf, int peer) override {
    return inner_.Recv(buf, peer);
  }
  absl::Status Barrier() override { return inner_.Barrier(); }

 private:
  comm::Communicator& inner_;
};

// Without a device stream (the simulated cluster) there is no device track.
TEST(DdpTraceTest, NoDeviceTrackWithoutADevice) {
  for (const trace::Event& e : Traced(/*overlap=*/true)) {
    EXPECT_NE(e.tid, 2) << e.name;
    EXPECT_NE(e.category, "device") << e.name;
  }
}

// An engine that times its device stream: each bucket's all-reduce also
// appears on the rank's device-stream track with exactly the engine's times.
TEST(DdpTraceTest, DeviceTimedAllReducesGoOnTheDeviceStreamTrack) {
  trace::Stop();
  trace::Clear();
  trace::Start();
  const sim::RunResult result =
      sim::Run(kRanks, [](int, comm::Communicator& comm) {
        DeviceTimedCommunicator timed(comm);
        return TrainSteps(timed, /*overlap=*/true);
      });
  trace::Stop();
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<trace::Event> events = trace::Snapshot();
  trace::Clear();
  // Per rank and bucket name, in time order: the comm-track events and the
  // device-track events.
  std::map<std::pair<int, std::string>, std::vector<trace::Event>> comm_events;
  std::map<std::pair<int, std::string>, std::vector<trace::Event>>
      device_events;
  for (const trace::Event& e : events) {
    if (e.tid == 1) comm_events[{e.rank, e.name}].push_back(e);
    if (e.tid == 2) {
      EXPECT_EQ(e.category, "device");
      device_events[{e.rank, e.name}].push_back(e);
    }
  }
  ASSERT_EQ(device_events.size(), static_cast<size_t>(kRanks * kBuckets));
  for (const auto& [key, device] : device_events) {
    const std::vector<trace::Event>& launched = comm_events[key];
    ASSERT_EQ(device.size(), static_cast<size_t>(kSteps)) << key.second;
    ASSERT_EQ(launched.size(), static_cast<size_t>(kSteps)) << key.second;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(device[step].start_us, launched[step].start_us + 5)
          << "rank " << key.first << " " << key.second;
      EXPECT_EQ(device[step].duration_us, 7);
      EXPECT_NE(device[step].args.find("\"bytes\":"), std::string::npos);
    }
  }
}

// Per rank: the backward events of the DDP (one per step) and the bucket
// all-reduces, in time order.
struct RankTimeline {
  std::vector<trace::Event> backward;
  std::vector<trace::Event> all_reduces;
  std::map<std::string, int> names;
};

std::map<int, RankTimeline> ByRank(const std::vector<trace::Event>& events) {
  std::map<int, RankTimeline> out;
  for (const trace::Event& e : events) {
    RankTimeline& t = out[e.rank];
    ++t.names[e.name];
    if (e.category == "ddp" && e.name == "backward") t.backward.push_back(e);
    if (absl::StartsWith(e.name, "AllReduce bucket")) {
      t.all_reduces.push_back(e);
    }
  }
  return out;
}

TEST(DdpTraceTest, EveryEventOnARankTrackWithModulesAndSteps) {
  const std::vector<trace::Event> events = Traced(/*overlap=*/true);
  ASSERT_FALSE(events.empty());
  for (const trace::Event& e : events) {
    ASSERT_GE(e.rank, 0) << e.name;
    ASSERT_LT(e.rank, kRanks) << e.name;
    if (e.category == "comm") {
      EXPECT_EQ(e.tid, 1) << e.name;
    } else {
      EXPECT_EQ(e.tid, 0) << e.name;
    }
  }
  const std::map<int, RankTimeline> ranks = ByRank(events);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  for (const auto& [rank, t] : ranks) {
    for (const char* name :
         {"forward", "backward", "wait for gradient all-reduces", "Sgd step",
          "Linear[0] forward", "ReLU[1] forward", "Linear[5] forward",
          "Linear[0] backward", "Linear[5] backward"}) {
      EXPECT_GE(t.names.count(name) ? t.names.at(name) : 0, kSteps)
          << "rank " << rank << ": " << name;
    }
    EXPECT_EQ(t.all_reduces.size(), static_cast<size_t>(kBuckets * kSteps))
        << "rank " << rank;
  }
}

TEST(DdpTraceTest, OverlapOnLaunchesBeforeBackwardEnds) {
  const std::map<int, RankTimeline> ranks = ByRank(Traced(/*overlap=*/true));
  for (const auto& [rank, t] : ranks) {
    ASSERT_EQ(t.backward.size(), static_cast<size_t>(kSteps));
    for (int step = 0; step < kSteps; ++step) {
      const trace::Event& backward = t.backward[step];
      int launched_during_backward = 0;
      for (const trace::Event& ar : t.all_reduces) {
        if (ar.start_us >= backward.start_us && ar.start_us < End(backward)) {
          ++launched_during_backward;
        }
      }
      // The last layer's bucket is ready long before the first layer's
      // gradient is computed.
      EXPECT_GE(launched_during_backward, 1)
          << "rank " << rank << " step " << step;
    }
  }
}

TEST(DdpTraceTest, OverlapOffLaunchesAfterBackwardEnds) {
  const std::map<int, RankTimeline> ranks = ByRank(Traced(/*overlap=*/false));
  for (const auto& [rank, t] : ranks) {
    ASSERT_EQ(t.backward.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(t.all_reduces.size(), static_cast<size_t>(kBuckets * kSteps));
    for (int step = 0; step < kSteps; ++step) {
      const trace::Event& backward = t.backward[step];
      for (int b = 0; b < kBuckets; ++b) {
        const trace::Event& ar = t.all_reduces[step * kBuckets + b];
        EXPECT_GE(ar.start_us, End(backward))
            << "rank " << rank << " step " << step << " " << ar.name;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::train
