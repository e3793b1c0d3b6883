// DDP's broadcast_buffers and uneven inputs under train::Join, on the
// simulated cluster, with the model and inputs of ddp_join_testing.h.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/autograd/autograd.h"
#include "tensor/nn/module.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/ddp/ddp_join_testing.h"
#include "train/parallel/ddp/join.h"
#include "train/parallel/sharded/zero_optimizer.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

std::vector<float> Values(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  return v.ok() ? *v : std::vector<float>{};
}

std::string CaseName(const ::testing::TestParamInfo<JoinCase>& info) {
  return JoinCaseName(info.param);
}

// ---- broadcast_buffers.

class BroadcastBuffersTest : public ::testing::TestWithParam<int> {};

TEST_P(BroadcastBuffersTest, OnEveryRankTrainsWithRankZerosBuffers) {
  const int n = GetParam();
  constexpr int kSteps = 4;
  for (const bool broadcast : {true, false}) {
    SCOPED_TRACE(broadcast ? "broadcast_buffers" : "no broadcast");
    sim::RunResult result =
        sim::Run(n, [&](int r, comm::Communicator& comm) -> absl::Status {
          // Rank-dependent initial buffers: Create broadcasts rank 0's.
          TANDEM_ASSIGN_OR_RETURN(
              auto model, BufferModel::Create(100.f * static_cast<float>(r)));
          TANDEM_ASSIGN_OR_RETURN(
              auto ddp, DistributedDataParallel::Create(
                            *model, comm, {.broadcast_buffers = broadcast}));
          for (int t = 0; t < kSteps; ++t) {
            TANDEM_ASSIGN_OR_RETURN(Tensor x, Input(r, t));
            TANDEM_RETURN_IF_ERROR(Step(*ddp, nullptr, x).status());
          }
          // What a rank added at step t; sums of small integers, exact.
          const auto own = [&](int rank, int t, int col) {
            return col == 0 ? XA(rank, t) : XB(rank, t);
          };
          for (int t = 0; t < kSteps; ++t) {
            for (int col = 0; col < 2; ++col) {
              // On entry to step t: with the broadcast, rank 0's buffer after
              // step t - 1; without, this rank's own.
              float expected = 0;
              for (int u = 0; u < t; ++u)
                expected += own(broadcast ? 0 : r, u, col);
              EXPECT_EQ(model->entry_totals[t][col], expected)
                  << "rank " << r << " step " << t << " column " << col;
            }
            EXPECT_EQ(model->entry_calls[t], t)
                << "rank " << r << " step " << t;
          }
          // After the last step: the entry value plus this rank's own input.
          const std::vector<float> total = Values(model->Buffers()[0]);
          EXPECT_EQ(total[0],
                    model->entry_totals[kSteps - 1][0] + own(r, kSteps - 1, 0));
          return absl::OkStatus();
        });
    ASSERT_TRUE(result.ok()) << result.status();
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BroadcastBuffersTest, ::testing::Values(2, 3));

// Collectives a Forward issued: the sequence numbers of two probes around it.
absl::StatusOr<int64_t> CollectivesIn(comm::Communicator& comm,
                                      DistributedDataParallel& ddp,
                                      const Tensor& x) {
  float probe = 0;
  auto before = comm.AllReduce(comm::HostView(absl::MakeSpan(&probe, 1)),
                               comm::ReduceOp::kSum);
  TANDEM_RETURN_IF_ERROR(before->Wait());
  TANDEM_RETURN_IF_ERROR(ddp.Forward(x).status());
  auto after = comm.AllReduce(comm::HostView(absl::MakeSpan(&probe, 1)),
                              comm::ReduceOp::kSum);
  TANDEM_RETURN_IF_ERROR(after->Wait());
  return after->record().fp.seq - before->record().fp.seq - 1;
}

// One Broadcast per dtype (f32: total and unused; i64: calls), and PyTorch's
// rule for which Forwards broadcast: those after a synchronised one.
TEST(BroadcastBuffersTest, CoalescedAndOnlyAfterASynchronisedForward) {
  sim::RunResult result =
      sim::Run(2, [&](int r, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, BufferModel::Create(0));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Input(r, 0));
        std::vector<int64_t> counts;
        const auto count = [&]() -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(int64_t c, CollectivesIn(comm, *ddp, x));
          counts.push_back(c);
          return absl::OkStatus();
        };
        TANDEM_RETURN_IF_ERROR(count());  // first: broadcasts
        TANDEM_RETURN_IF_ERROR(count());  // after a synchronised one
        {
          NoGradGuard no_grad;
          TANDEM_RETURN_IF_ERROR(count());  // evaluation after training
          TANDEM_RETURN_IF_ERROR(count());  // after an evaluation: none
        }
        TANDEM_RETURN_IF_ERROR(count());  // after an evaluation: none
        {
          auto no_sync = ddp->NoSync();
          TANDEM_RETURN_IF_ERROR(count());  // first micro-batch
          TANDEM_RETURN_IF_ERROR(count());  // after a local one: none
        }
        TANDEM_RETURN_IF_ERROR(count());  // after a local one: none
        TANDEM_RETURN_IF_ERROR(count());  // after a synchronised one
        EXPECT_EQ(counts, (std::vector<int64_t>{2, 2, 2, 0, 0, 2, 0, 0, 2}))
            << "rank " << r;
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

// ---- Join: uneven inputs.

class JoinTest : public ::testing::TestWithParam<JoinCase> {};

// Every rank trains on its own number of batches inside a Join, then calls
// Finish: no hang, no error, and what RunUnevenJoin checks
// (ddp_join_testing.h).
TEST_P(JoinTest, UnevenInputsTrainToTheEnd) {
  const JoinCase c = GetParam();
  const sim::RunResult result =
      sim::Run(static_cast<int>(c.batches.size()),
               [&](int rank, comm::Communicator& comm) {
                 return RunUnevenJoin(c, rank, comm);
               });
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    EXPECT_TRUE(result.ranks[r].ok())
        << "rank " << r << ": " << result.ranks[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, JoinTest, ::testing::ValuesIn(JoinCases()),
                         CaseName);

// The same uneven run without a Join: the ranks still training fail with
// the communicator's error naming the rank that stopped, whether it returned
// (at once) or stays alive without issuing the collective (the timeout).
TEST(JoinTest, WithoutJoinTheOthersFailNamingTheStoppedRank) {
  const std::vector<int> batches = {3, 5, 4};
  for (const bool returns : {true, false}) {
    SCOPED_TRACE(returns ? "rank 0 returns" : "rank 0 stays");
    std::mutex mu;
    std::condition_variable cv;
    int failed = 0;
    sim::Options options;
    options.timeout = absl::Seconds(5);
    sim::RunResult result = sim::Run(
        3,
        [&](int r, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(auto model, BufferModel::Create(0));
          TANDEM_ASSIGN_OR_RETURN(
              auto ddp, DistributedDataParallel::Create(
                            *model, comm, {.timeout = absl::Minutes(2)}));
          absl::Status status;
          for (int t = 0; t < batches[r] && status.ok(); ++t) {
            absl::StatusOr<Tensor> x = Input(r, t);
            status = x.ok() ? Step(*ddp, nullptr, *x).status() : x.status();
          }
          if (r == 0 && !returns) {
            // Alive but silent until both others have failed (bounded).
            std::unique_lock<std::mutex> lock(mu);
            cv.wait_for(lock, std::chrono::minutes(2),
                        [&] { return failed == 2; });
          } else if (r != 0) {
            std::lock_guard<std::mutex> lock(mu);
            ++failed;
            cv.notify_all();
          }
          return status;
        },
        options);
    EXPECT_TRUE(result.ranks[0].ok()) << result.ranks[0];
    for (int r : {1, 2}) {
      const absl::Status& s = result.ranks[r];
      // Step 3's Forward broadcasts the buffers: rank 0 never issues it.
      EXPECT_THAT(std::string(s.message()),
                  HasSubstr("broadcasting the module's buffers"))
          << "rank " << r;
      if (returns) {
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
        EXPECT_THAT(std::string(s.message()),
                    ::testing::ContainsRegex(
                        "rank 0 \\(after issuing [0-9]+ collectives\\) "
                        "returned from its function without issuing it"));
      } else {
        EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
        EXPECT_THAT(std::string(s.message()),
                    ::testing::ContainsRegex(
                        "did not complete within 5s: rank 0 \\(it has "
                        "issued [0-9]+ collectives\\) never issued it"));
      }
    }
  }
}

// throw_on_early_termination: the rank that finishes first stops every rank
// at the next step, each with an error saying why.
TEST(JoinTest, ThrowOnEarlyTerminationStopsEveryRank) {
  const std::vector<int> batches = {1, 3, 3};
  sim::RunResult result =
      sim::Run(3, [&](int r, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, BufferModel::Create(0));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(
            auto join,
            Join::Create({ddp.get()}, {.throw_on_early_termination = true}));
        for (int t = 0; t < batches[r]; ++t) {
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Input(r, t));
          TANDEM_RETURN_IF_ERROR(Step(*ddp, nullptr, x).status());
        }
        return join->Finish();
      });
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.ranks[0].message()),
              HasSubstr("Join on rank 0: this rank ran out of inputs while 2 "
                        "rank(s) still train"));
  for (int r : {1, 2}) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(result.ranks[r].message()),
                HasSubstr(absl::StrCat("Join on rank ", r,
                                       ": 1 rank(s) ran out of inputs while "
                                       "2 still train")));
  }
}

// A DDP destroyed before Finish leaves its Join: Finish fails, saying so,
// instead of calling into it.
TEST(JoinTest, AJoinableDestroyedFirstMakesFinishFail) {
  sim::RunResult result =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, BufferModel::Create(0));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(auto join, Join::Create({ddp.get()}));
        ddp.reset();
        const absl::Status s = join->Finish();
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(std::string(s.message()),
                    HasSubstr("was destroyed before Join::Finish"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

// What DDP cannot shadow or honour is refused when the Join is made.
TEST(JoinTest, CreateRefusesWhatDdpCannotShadow) {
  sim::RunResult result =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, BufferModel::Create(0));
        {
          TANDEM_ASSIGN_OR_RETURN(
              auto zero2, DistributedDataParallel::Create(*model, comm));
          TANDEM_ASSIGN_OR_RETURN(
              auto zero,
              ZeroRedundancyOptimizer::Create(
                  *zero2,
                  [](std::vector<Tensor> shards)
                      -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
                    TANDEM_ASSIGN_OR_RETURN(
                        optim::Sgd sgd,
                        optim::Sgd::Create(std::move(shards), 0.1));
                    return std::make_unique<optim::Sgd>(std::move(sgd));
                  },
                  {.reduce_scatter_gradients = true}));
          absl::StatusOr<std::unique_ptr<Join>> join =
              Join::Create({zero2.get()});
          EXPECT_EQ(join.status().code(), absl::StatusCode::kInvalidArgument);
          EXPECT_THAT(std::string(join.status().message()),
                      HasSubstr("reduce_scatter_gradients (ZeRO-2)"));
        }
        TANDEM_ASSIGN_OR_RETURN(
            auto fp16,
            DistributedDataParallel::Create(
                *model, comm, {.comm_hook = DdpCommHook::kF16Compress}));
        absl::StatusOr<std::unique_ptr<Join>> join =
            Join::Create({fp16.get()}, {.divide_by_initial_world_size = false});
        EXPECT_EQ(join.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(std::string(join.status().message()),
                    HasSubstr("compressing hooks divide by the world size"));
        // Dividing by the initial world size is what the hook does: fine.
        TANDEM_ASSIGN_OR_RETURN(auto ok, Join::Create({fp16.get()}));
        // A joinable takes part in one Join at a time.
        absl::StatusOr<std::unique_ptr<Join>> twice =
            Join::Create({fp16.get()});
        EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

}  // namespace
}  // namespace tandem::train
