// DistributedDataParallel with its parameters on a (fake) CUDA device, on
// machines without a GPU.
//
// tensor/testing/fake_device.h gives a host-backed "CUDA" allocator; this test
// replaces four of its kernels with ones that really fill, add, scale and
// convert (the rest stay Unimplemented), because the simulated ranks are
// threads. DeviceMemoryCommunicator plays NCCL's memory rule on top of the
// simulated cluster: it takes only kCuda buffers of its rank's device and
// fails host buffers, so Create() succeeding proves that the model check was
// staged through the device; the bytes then move through sim (the fake
// device's memory is host memory). What runs on a real GPU is in
// train/nccl_examples_test.sh (tagged gpu).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "comm/work.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/convert.h"
#include "tensor/device.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const ::absl::Status ddp_dev_test_s_ = (expr);        \
    ASSERT_TRUE(ddp_dev_test_s_.ok()) << ddp_dev_test_s_; \
  } while (false)

// Kernels for the fake device that are safe to call from several rank
// threads: fills, adds, scales and conversions really run on the (host)
// memory; every other op keeps the fake device's Unimplemented kernel.
// Counts calls per op.
class HostKernels {
 public:
  int64_t count(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[op];
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    counts_.clear();
  }
  void Count(const std::string& op) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[op];
  }

 private:
  std::mutex mu_;
  std::map<std::string, int64_t> counts_;  // guarded by mu_
};

HostKernels& Counts() {
  static HostKernels* counts = new HostKernels;  // leaked: process-wide
  return *counts;
}

absl::Status HostAddInPlace(const Tensor& dst, const Tensor& src,
                            double alpha) {
  Counts().Count("AddInPlace");
  if (dst.dtype() != DType::kF32 || src.dtype() != DType::kF32 ||
      dst.numel() != src.numel()) {
    return absl::UnimplementedError("test kernels: AddInPlace on f32 only");
  }
  float* d = static_cast<float*>(dst.raw_data());
  const float* s = static_cast<const float*>(src.raw_data());
  for (int64_t i = 0; i < dst.numel(); ++i) {
    d[i] += static_cast<float>(alpha) * s[i];
  }
  return absl::OkStatus();
}
absl::Status HostScaleInPlace(const Tensor& dst, double factor) {
  Counts().Count("ScaleInPlace");
  if (dst.dtype() != DType::kF32) {
    return absl::UnimplementedError("test kernels: ScaleInPlace on f32 only");
  }
  float* d = static_cast<float*>(dst.raw_data());
  for (int64_t i = 0; i < dst.numel(); ++i) {
    d[i] *= static_cast<float>(factor);
  }
  return absl::OkStatus();
}
absl::Status HostFillInPlace(const Tensor& dst, double value) {
  Counts().Count("FillInPlace");
  internal::FillElements(dst.raw_data(), dst.dtype(), dst.numel(), value);
  return absl::OkStatus();
}
absl::Status HostConvert(const Tensor& src, const Tensor& dst) {
  Counts().Count("Convert");
  internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                            dst.dtype(), src.numel());
  return absl::OkStatus();
}

// The fake device with the kernels above; installed once per process.
HostKernels& Kernels() {
  static HostKernels* kernels = [] {
    FakeDevice::Install();  // the host-backed allocator and fake kernels
    constexpr DeviceType kCuda = DeviceType::kCUDA;
    AddInPlaceKernels().Register(kCuda, HostAddInPlace).IgnoreError();
    ScaleInPlaceKernels().Register(kCuda, HostScaleInPlace).IgnoreError();
    FillInPlaceKernels().Register(kCuda, HostFillInPlace).IgnoreError();
    ConvertKernels().Register(kCuda, HostConvert).IgnoreError();
    return &Counts();
  }();
  return *kernels;
}

// Inside DeviceMemoryCommunicator: fails the call like NCCL for a buffer
// that is not this rank's device memory, else relabels it as host memory.
#define TANDEM_TEST_RELABEL(buf)                      \
  do {                                                \
    absl::Status relabel_status = Relabel(buf);       \
    if (!relabel_status.ok()) {                       \
      return comm::MakeCompletedWork(relabel_status); \
    }                                                 \
  } while (false)

// NCCL's memory rule over a simulated rank: every buffer must be kCuda
// memory of `device`; host buffers are argument errors (already-failed
// Works). Accepted buffers are forwarded to `inner` as host memory, which
// the fake device's memory is. Counts the buffers it saw per space.
class DeviceMemoryCommunicator : public comm::Communicator {
 public:
  DeviceMemoryCommunicator(comm::Communicator& inner, int device)
      : inner_(inner), device_(device) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return "device-only"; }
  comm::LineSink& output() const override { return inner_.output(); }

  std::unique_ptr<comm::Work> AllReduce(comm::BufferView buf,
                                        comm::ReduceOp op) override {
    TANDEM_TEST_RELABEL(buf);
    ++all_reduces;
    all_reduce_ops.push_back(op);
    return inner_.AllReduce(buf, op);
  }
  std::unique_ptr<comm::Work> Broadcast(comm::BufferView buf,
                                        int root) override {
    TANDEM_TEST_RELABEL(buf);
    ++broadcasts;
    return inner_.Broadcast(buf, root);
  }
  std::unique_ptr<comm::Work> AllGather(comm::BufferView send,
                                        comm::BufferView recv) override {
    TANDEM_TEST_RELABEL(send);
    TANDEM_TEST_RELABEL(recv);
    ++all_gathers;
    return inner_.AllGather(send, recv);
  }
  std::unique_ptr<comm::Work> ReduceScatter(comm::BufferView send,
                                            comm::BufferView recv,
                                            comm::ReduceOp op) override {
    TANDEM_TEST_RELABEL(send);
    TANDEM_TEST_RELABEL(recv);
    return inner_.ReduceScatter(send, recv, op);
  }
  std::unique_ptr<comm::Work> Send(comm::BufferView buf, int peer) override {
    TANDEM_TEST_RELABEL(buf);
    return inner_.Send(buf, peer);
  }
  std::unique_ptr<comm::Work> Recv(comm::BufferView buf, int peer) override {
    TANDEM_TEST_RELABEL(buf);
    return inner_.Recv(buf, peer);
  }
  absl::Status Barrier() override { return inner_.Barrier(); }

  int64_t all_reduces = 0;
  std::vector<comm::ReduceOp> all_reduce_ops;
  int64_t broadcasts = 0;
  int64_t all_gathers = 0;

 private:
  // A host (or other-device) buffer fails like NCCL; a device buffer
  // becomes the host view of the same memory.
  absl::Status Relabel(comm::BufferView& buf) const {
    if (buf.space != comm::MemorySpace::kCuda || buf.device != device_) {
      return absl::InvalidArgumentError(
          absl::StrCat("device-only communicator of rank ", rank(),
                       ": expected memory of "
                       "cuda:",
                       device_, ", got a ",
                       buf.space == comm::MemorySpace::kHost ? "host" : "cuda",
                       " buffer (device ", buf.device, ")"));
    }
    buf.space = comm::MemorySpace::kHost;
    buf.device = -1;
    return absl::OkStatus();
  }

  comm::Communicator& inner_;
  int device_;
};

std::vector<float> HostFloats(const Tensor& t) {
  const float* p = t.data<float>();
  return p == nullptr ? std::vector<float>()
                      : std::vector<float>(p, p + t.numel());
}

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp(int64_t in, int64_t hidden,
                                                    int64_t out,
                                                    uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(in, hidden, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(hidden, out, gen)));
  return model;
}

// Parameters a [4], b [2], c [3] (registration order) and, optionally, a
// buffer; Forward returns its input, so a test can drive the gradients
// itself (leaf Backward calls) without device matmuls.
class Params : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<Params>> Create(Device device,
                                                        bool with_buffer) {
    auto m = std::unique_ptr<Params>(new Params());
    for (const auto& [name, n] : std::vector<std::pair<std::string, int64_t>>{
             {"a", 4}, {"b", 2}, {"c", 3}}) {
      TANDEM_ASSIGN_OR_RETURN(Tensor p,
                              Tensor::Zeros({n}, DType::kF32, device));
      TANDEM_RETURN_IF_ERROR(m->RegisterParameter(name, p));
    }
    if (with_buffer) {
      TANDEM_ASSIGN_OR_RETURN(Tensor steps, Tensor::Zeros({1}, DType::kI64));
      TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("steps", steps));
    }
    return m;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override { return x; }
  std::string_view type_name() const override { return "Params"; }

 private:
  Params() = default;
};

TEST(DdpDeviceTest, CreateStagesTheCheckAndBroadcastsOnTheDevice) {
  Kernels().Reset();
  absl::StatusOr<std::unique_ptr<nn::Sequential>> reference = Mlp(4, 8, 3, 1);
  ASSERT_OK(reference.status());
  const std::vector<Tensor> want = (*reference)->Parameters();

  sim::RunResult run =
      sim::Run(2, [&](int rank, comm::Communicator& sim_comm) -> absl::Status {
        const Device device = Device::CUDA(rank);
        DeviceMemoryCommunicator comm(sim_comm, rank);
        // Different initial weights on each rank: the broadcast must fix them.
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                                Mlp(4, 8, 3, /*seed=*/1 + rank));
        TANDEM_RETURN_IF_ERROR(model->To(device));
        DdpOptions options;
        options.first_bucket_cap_bytes = 110;  // 2.bias + 2.weight
        options.bucket_cap_bytes = 100;        // 0.bias; 0.weight alone
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<DistributedDataParallel> ddp,
            DistributedDataParallel::Create(*model, comm, options));
        // One staged AllReduce (the model check: the descriptions' hashes
        // agree, so nothing is gathered), one broadcast per parameter (no
        // buffers).
        EXPECT_EQ(comm.all_gathers, 0);
        EXPECT_EQ(comm.broadcasts, 4);
        EXPECT_EQ(comm.all_reduces, 1);
        // Rank 0's weights everywhere, still on this rank's device.
        const std::vector<Tensor> params = model->Parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          EXPECT_EQ(params[i].device(), device) << i;
          EXPECT_EQ(HostFloats(params[i]), HostFloats(want[i]))
              << "rank " << rank << " parameter " << i;
        }
        // Buckets on the device, every gradient a view into its bucket.
        const std::vector<DdpBucket>& buckets = ddp->buckets();
        EXPECT_EQ(buckets.size(), 3u);
        for (const DdpBucket& b : buckets) EXPECT_EQ(b.flat.device(), device);
        for (const nn::NamedTensor& p : model->NamedParameters()) {
          const Tensor g = p.tensor.grad();
          EXPECT_EQ(g.device(), device) << p.name;
          bool in_a_bucket = false;
          for (const DdpBucket& b : buckets) {
            in_a_bucket = in_a_bucket || g.SharesStorageWith(b.flat);
          }
          EXPECT_TRUE(in_a_bucket) << p.name;
        }
        return absl::OkStatus();
      });
  ASSERT_OK(run.status());
}

TEST(DdpDeviceTest, TheStagedCheckStillFindsDifferentModels) {
  Kernels().Reset();
  sim::RunResult run =
      sim::Run(2, [&](int rank, comm::Communicator& sim_comm) -> absl::Status {
        DeviceMemoryCommunicator comm(sim_comm, rank);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                                Mlp(4, rank == 0 ? 8 : 6, 3, 1));
        TANDEM_RETURN_IF_ERROR(model->To(Device::CUDA(rank)));
        return DistributedDataParallel::Create(*model, comm).status();
      });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(run.ranks[r].code(), absl::StatusCode::kInvalidArgument) << r;
    EXPECT_THAT(run.ranks[r].message(),
                HasSubstr("the ranks hold different models: parameter 0 "))
        << r;
  }
}

class DdpDeviceAverageTest : public ::testing::TestWithParam<int> {};

TEST_P(DdpDeviceAverageTest,
       AveragesOnTheDeviceAndBucketsLaunchDuringBackward) {
  // World 2: the average rides on the all-reduce (kAvg, no scaling kernel);
  // world 3: a ScaleInPlace kernel per parameter, then a Sum. Either way
  // PyTorch's arithmetic: sum over ranks of g_r * float(1 / world).
  const int world = GetParam();
  const bool pow2 = world == 2;
  Kernels().Reset();
  sim::RunResult run = sim::Run(
      world, [&](int rank, comm::Communicator& sim_comm) -> absl::Status {
        const Device device = Device::CUDA(rank);
        DeviceMemoryCommunicator comm(sim_comm, rank);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Params> model,
                                Params::Create(device, /*with_buffer=*/false));
        DdpOptions options;
        options.first_bucket_cap_bytes = 12;  // c
        options.bucket_cap_bytes = 8;         // b; a (16 B) alone
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<DistributedDataParallel> ddp,
            DistributedDataParallel::Create(*model, comm, options));
        EXPECT_EQ(ddp->buckets().size(), 3u);
        const std::vector<Tensor> params = model->Parameters();  // a, b, c
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros({1}));
        TANDEM_RETURN_IF_ERROR(ddp->Forward(x).status());
        // Backward order c, b, a; rank r's gradient of parameter i is
        // (r + 1) * (i + 1). Each bucket launches as soon as it is complete.
        for (int i = 2; i >= 0; --i) {
          TANDEM_ASSIGN_OR_RETURN(
              Tensor seed, Tensor::Full(params[i].shape(), (rank + 1) * (i + 1),
                                        DType::kF32, device));
          TANDEM_RETURN_IF_ERROR(params[i].Backward(seed));
          EXPECT_EQ(ddp->num_buckets_launched(), 3 - i)
              << "after parameter " << i;
        }
        // The model check's Max at Create, then one per bucket.
        EXPECT_EQ(comm.all_reduces, 4);
        const comm::ReduceOp bucket_op =
            pow2 ? comm::ReduceOp::kAvg : comm::ReduceOp::kSum;
        EXPECT_EQ(comm.all_reduce_ops,
                  (std::vector<comm::ReduceOp>{comm::ReduceOp::kMax, bucket_op,
                                               bucket_op, bucket_op}));
        TANDEM_RETURN_IF_ERROR(ddp->FinishGradientSync());
        const float scale = static_cast<float>(1.0 / world);
        for (int i = 0; i < 3; ++i) {
          float expected = 0;
          for (int r = 0; r < world; ++r) {
            expected += static_cast<float>((r + 1) * (i + 1)) * scale;
          }
          const Tensor g = params[i].grad();
          EXPECT_EQ(g.device(), device);
          EXPECT_EQ(HostFloats(g), std::vector<float>(g.numel(), expected))
              << "rank " << rank << " parameter " << i;
        }
        return absl::OkStatus();
      });
  ASSERT_OK(run.status());
  // Any scaling ran as a device kernel: once per parameter per rank.
  EXPECT_EQ(Kernels().count("ScaleInPlace"), pow2 ? 0 : 3 * world);
}

INSTANTIATE_TEST_SUITE_P(Worlds, DdpDeviceAverageTest, ::testing::Values(2, 3));

TEST(DdpDeviceTest, MovingTheModuleAfterWrappingIsReported) {
  Kernels().Reset();
  sim::RunResult run =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Params> model,
                                Params::Create(Device::CPU(), false));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DistributedDataParallel> ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_RETURN_IF_ERROR(model->To(Device::CUDA(0)));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros({1}));
        absl::Status s = ddp->Forward(x).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(
            s.message(),
            HasSubstr("parameters are on cuda:0 but its gradient buckets "
                      "were made on cpu: the module was moved"));
        return absl::OkStatus();
      });
  ASSERT_OK(run.status());
}

TEST(DdpDeviceTest, ParametersAndBuffersMustShareADevice) {
  Kernels().Reset();
  sim::RunResult run =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        // Parameters on cuda:0, the buffer left on the CPU.
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Params> model,
                                Params::Create(Device::CUDA(0), true));
        absl::Status s = DistributedDataParallel::Create(*model, comm).status();
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(
            s.message(),
            HasSubstr("buffer \"steps\" is on cpu but parameter \"a\" is "
                      "on cuda:0; move the whole module to one device"));
        // Moved together, it is accepted.
        TANDEM_RETURN_IF_ERROR(model->To(Device::CUDA(0)));
        return DistributedDataParallel::Create(*model, comm).status();
      });
  ASSERT_OK(run.status());
}

}  // namespace
}  // namespace tandem::train
