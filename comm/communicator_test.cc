// The Communicator contract's default Split: engines without
// sub-communicators say so, naming themselves, on every rank alike.
#include "comm/communicator.h"

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "comm/work.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

// An engine that implements nothing but the pure virtuals.
class NoSplitCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view backend() const override { return "toy"; }
  std::unique_ptr<Work> AllReduce(BufferView, ReduceOp) override {
    return nullptr;
  }
  std::unique_ptr<Work> Broadcast(BufferView, int) override { return nullptr; }
  std::unique_ptr<Work> AllGather(BufferView, BufferView) override {
    return nullptr;
  }
  std::unique_ptr<Work> ReduceScatter(BufferView, BufferView,
                                      ReduceOp) override {
    return nullptr;
  }
  std::unique_ptr<Work> Send(BufferView, int) override { return nullptr; }
  std::unique_ptr<Work> Recv(BufferView, int) override { return nullptr; }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

TEST(CommunicatorTest, DefaultSplitIsUnimplementedNamingTheEngine) {
  NoSplitCommunicator comm;
  absl::Status s = comm.Split(0, 0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("not implemented by the 'toy' engine"));
}

}  // namespace
}  // namespace tandem::comm
