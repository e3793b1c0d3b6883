#include "comm/front.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// An engine that records what reaches it and completes everything at once.
class RecordingEngine final : public EngineFront {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string_view backend() const override { return "recording"; }

  std::vector<Operation> posted;
  absl::Status own_check;

 protected:
  absl::Status CheckOperation(const Operation&) override { return own_check; }
  std::unique_ptr<Work> Post(const Operation& op) override {
    posted.push_back(op);
    Fingerprint fp = op.fp;
    fp.seq = static_cast<int64_t>(posted.size()) - 1;
    return MakeCompletedWork(absl::OkStatus(), StartRecord(fp, size()));
  }
};

TEST(EngineFrontTest, HandsTheEngineTheFingerprintAndBuffers) {
  RecordingEngine e;
  std::vector<float> a(4), b(8);
  ASSERT_TRUE(
      e.AllReduce(HostView(absl::MakeSpan(a)), ReduceOp::kMax)->Wait().ok());
  ASSERT_TRUE(
      e.AllGather(HostView(absl::MakeSpan(a)), HostView(absl::MakeSpan(b)))
          ->Wait()
          .ok());
  ASSERT_TRUE(e.Send(HostView(absl::MakeSpan(a)), 1)->Wait().ok());
  ASSERT_TRUE(e.Barrier().ok());
  ASSERT_EQ(e.posted.size(), 4u);
  EXPECT_EQ(e.posted[0].fp.DebugString(), "#0 AllReduce(f32 x 4, max)");
  EXPECT_EQ(e.posted[0].buf.data, a.data());
  EXPECT_EQ(e.posted[1].fp.op, OpKind::kAllGather);
  EXPECT_EQ(e.posted[1].buf.data, a.data());
  EXPECT_EQ(e.posted[1].recv.data, b.data());
  EXPECT_EQ(e.posted[2].fp.peer, 1);
  EXPECT_EQ(e.posted[3].fp.op, OpKind::kBarrier);
  EXPECT_EQ(e.posted[3].fp.count, 0);
}

TEST(EngineFrontTest, ArgumentErrorsNeverReachTheEngine) {
  RecordingEngine e;
  std::vector<float> a(4);
  std::unique_ptr<Work> bad_root =
      e.Broadcast(HostView(absl::MakeSpan(a)), /*root=*/5);
  EXPECT_EQ(bad_root->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_root->record().fp.seq, -1);
  BufferView device{a.data(), 4, DType::kF32, MemorySpace::kCuda, 0};
  absl::Status on_device = e.AllReduce(device, ReduceOp::kSum)->Wait();
  EXPECT_EQ(on_device.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(on_device.message(), HasSubstr("recording"));
  std::vector<float> recv(8);
  BufferView device_recv{recv.data(), 8, DType::kF32, MemorySpace::kCuda, 0};
  absl::Status recv_on_device =
      e.AllGather(HostView(absl::MakeSpan(a)), device_recv)->Wait();
  EXPECT_THAT(recv_on_device.message(), HasSubstr("recv"));
  e.own_check = absl::InvalidArgumentError("the engine's own limit");
  absl::Status own = e.Recv(HostView(absl::MakeSpan(a)), 1)->Wait();
  EXPECT_THAT(own.message(), HasSubstr("the engine's own limit"));
  EXPECT_TRUE(e.posted.empty());
}

TEST(EngineFrontTest, TreeSumOnlyReachesAnEngineThatOffersIt) {
  RecordingEngine e;  // native_tree_sum() is false
  std::vector<float> a(4), b(2);
  absl::Status all_reduce =
      e.AllReduce(HostView(absl::MakeSpan(a)), ReduceOp::kTreeSum)->Wait();
  EXPECT_EQ(all_reduce.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(all_reduce.message(), HasSubstr("'recording' engine has no "
                                              "native tree_sum"));
  EXPECT_THAT(all_reduce.message(), HasSubstr("comm::OrderedAllReduce"));
  absl::Status reduce_scatter =
      e.ReduceScatter(HostView(absl::MakeSpan(a)), HostView(absl::MakeSpan(b)),
                      ReduceOp::kTreeSum)
          ->Wait();
  EXPECT_EQ(reduce_scatter.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(e.posted.empty());
}

// A per-operation engine that records which of its Post* each call reached.
class PerOperationEngine final : public PerOperationFront {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  std::string_view backend() const override { return "per-op"; }

  std::vector<std::string> calls;

 protected:
  std::string_view engine_name() const override { return "per-op (staged)"; }
  std::unique_ptr<Work> PostAllReduce(BufferView, ReduceOp op) override {
    return Done(absl::StrCat("AllReduce ", ReduceOpName(op)));
  }
  std::unique_ptr<Work> PostBroadcast(BufferView, int root) override {
    return Done(absl::StrCat("Broadcast root ", root));
  }
  std::unique_ptr<Work> PostAllGather(BufferView send,
                                      BufferView recv) override {
    return Done(absl::StrCat("AllGather ", send.count, " -> ", recv.count));
  }
  std::unique_ptr<Work> PostReduceScatter(BufferView send, BufferView recv,
                                          ReduceOp op) override {
    return Done(absl::StrCat("ReduceScatter ", send.count, " -> ", recv.count,
                             " ", ReduceOpName(op)));
  }
  std::unique_ptr<Work> PostSend(BufferView, int peer) override {
    return Done(absl::StrCat("Send to ", peer));
  }
  std::unique_ptr<Work> PostRecv(BufferView, int peer) override {
    return Done(absl::StrCat("Recv from ", peer));
  }
  std::unique_ptr<Work> PostBarrier() override { return Done("Barrier"); }

 private:
  std::unique_ptr<Work> Done(std::string call) {
    calls.push_back(std::move(call));
    return MakeCompletedWork(absl::OkStatus());
  }
};

TEST(PerOperationFrontTest, EachOperationReachesItsOwnPost) {
  PerOperationEngine e;
  std::vector<float> a(4), b(8), c(2);
  auto view = [](std::vector<float>& v) { return HostView(absl::MakeSpan(v)); };
  ASSERT_TRUE(e.AllReduce(view(a), ReduceOp::kMax)->Wait().ok());
  ASSERT_TRUE(e.Broadcast(view(a), 0)->Wait().ok());
  ASSERT_TRUE(e.AllGather(view(a), view(b))->Wait().ok());
  ASSERT_TRUE(e.ReduceScatter(view(a), view(c), ReduceOp::kSum)->Wait().ok());
  ASSERT_TRUE(e.Send(view(a), 0)->Wait().ok());
  ASSERT_TRUE(e.Recv(view(a), 0)->Wait().ok());
  ASSERT_TRUE(e.Barrier().ok());
  EXPECT_THAT(e.calls,
              ElementsAre("AllReduce max", "Broadcast root 0",
                          "AllGather 4 -> 8", "ReduceScatter 4 -> 2 sum",
                          "Send to 0", "Recv from 0", "Barrier"));
}

TEST(PerOperationFrontTest, ChecksComeFirstAndNameTheEngine) {
  PerOperationEngine e;
  std::vector<float> a(4);
  EXPECT_EQ(e.Send(HostView(absl::MakeSpan(a)), 1)->Wait().code(),
            absl::StatusCode::kInvalidArgument);  // itself
  BufferView device{a.data(), 4, DType::kF32, MemorySpace::kCuda, 0};
  absl::Status on_device = e.AllReduce(device, ReduceOp::kSum)->Wait();
  EXPECT_THAT(on_device.message(), HasSubstr("the per-op (staged) backend"));
  EXPECT_TRUE(e.calls.empty());
}

}  // namespace
}  // namespace tandem::comm
