// SlotPool: recycled slots are handed out again, start fresh (not ready, no
// task done, nobody active), are kept only up to kMaxKept; and a run that
// mixes every collective kind, count and root over recycled slots gets
// exact results (a stale plan or claim counter would misplace data).
#include "sim/slot_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "gtest/gtest.h"
#include "sim/group.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

comm::Fingerprint AllReduceOf(int64_t count, int64_t seq) {
  comm::Fingerprint fp =
      comm::MakeFingerprint(comm::OpKind::kAllReduce, comm::DType::kF32, count);
  fp.reduce_op = comm::ReduceOp::kSum;
  fp.seq = seq;
  return fp;
}

TEST(SlotPoolTest, AFreedSlotIsHandedOutAgainFresh) {
  auto pool = std::make_shared<internal::SlotPool>();
  std::shared_ptr<internal::Slot> first =
      pool->Take(AllReduceOf(8, 0), 2, 4096);
  const internal::Slot* address = first.get();
  EXPECT_EQ(first->reference().seq, 0);
  EXPECT_FALSE(first->ready());
  first.reset();
  EXPECT_EQ(pool->kept(), 1);
  std::shared_ptr<internal::Slot> second =
      pool->Take(AllReduceOf(1000, 7), 3, 4096);
  EXPECT_EQ(second.get(), address);
  EXPECT_EQ(pool->kept(), 0);
  EXPECT_EQ(second->reference().seq, 7);
  EXPECT_EQ(second->reference().count, 1000);
  EXPECT_EQ(second->num_participants(), 3);
  EXPECT_EQ(second->participant_ranks(), (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(second->ready());
  EXPECT_FALSE(second->tasks_done());
  EXPECT_EQ(second->active(), 0);
}

TEST(SlotPoolTest, KeepsAtMostMaxKept) {
  auto pool = std::make_shared<internal::SlotPool>();
  std::vector<std::shared_ptr<internal::Slot>> slots;
  for (int i = 0; i < internal::SlotPool::kMaxKept + 5; ++i) {
    slots.push_back(pool->Take(AllReduceOf(8, i), 2, 4096));
  }
  slots.clear();
  EXPECT_EQ(pool->kept(), internal::SlotPool::kMaxKept);
}

// A slot outlives its pool's owner: the deleter keeps the pool alive.
TEST(SlotPoolTest, ASlotMayOutliveThePoolsOwner) {
  auto pool = std::make_shared<internal::SlotPool>();
  std::shared_ptr<internal::Slot> slot = pool->Take(AllReduceOf(8, 0), 2, 4096);
  pool.reset();
  EXPECT_EQ(slot->reference().count, 8);
  slot.reset();  // gives it back to the pool, which then goes away
}

using SlotReuseTest = testing::ModeTest;

// Every kind of collective, several counts and roots, back to back and a
// few in flight at once, on 2 and 3 ranks: each slot is recycled many times
// with a different plan, and every result must be exact.
TEST_P(SlotReuseTest, MixedCollectivesOnRecycledSlotsAreExact) {
  for (const int n : {2, 3}) {
    RunResult result =
        RunRanks(n, [&](int rank, comm::Communicator& comm) -> absl::Status {
          auto fail = [&](int round, const char* what, double got,
                          double want) {
            return absl::InternalError(absl::StrCat("rank ", rank, " round ",
                                                    round, " ", what, ": got ",
                                                    got, ", want ", want));
          };
          for (int round = 0; round < 60; ++round) {
            const int64_t count = (round % 3 == 0)   ? 2
                                  : (round % 3 == 1) ? 1500
                                                     : 40000;
            // Two all-reduces in flight at once, then waited in reverse.
            std::vector<float> a(count, static_cast<float>(rank + 1));
            std::vector<float> b(count + 1, static_cast<float>(rank * 2));
            auto wa = comm.AllReduce(comm::HostView(absl::MakeSpan(a)),
                                     comm::ReduceOp::kSum);
            auto wb = comm.AllReduce(comm::HostView(absl::MakeSpan(b)),
                                     comm::ReduceOp::kMax);
            if (absl::Status s = wb->Wait(); !s.ok()) return s;
            if (absl::Status s = wa->Wait(); !s.ok()) return s;
            const float sum = static_cast<float>(n * (n + 1) / 2);
            if (a.front() != sum || a.back() != sum) {
              return fail(round, "sum", a.back(), sum);
            }
            if (b.back() != static_cast<float>((n - 1) * 2)) {
              return fail(round, "max", b.back(), (n - 1) * 2);
            }
            const int root = round % n;
            std::vector<int64_t> c(count / 2 + 1, rank == root ? round : -1);
            if (absl::Status s =
                    comm.Broadcast(comm::HostView(absl::MakeSpan(c)), root)
                        ->Wait();
                !s.ok()) {
              return s;
            }
            if (c.back() != round)
              return fail(round, "broadcast", c.back(), round);
            std::vector<float> send(count % 7 + 1, static_cast<float>(rank));
            std::vector<float> gathered(send.size() * n, -1.0f);
            if (absl::Status s =
                    comm.AllGather(comm::HostView(absl::MakeSpan(send)),
                                   comm::HostView(absl::MakeSpan(gathered)))
                        ->Wait();
                !s.ok()) {
              return s;
            }
            for (int q = 0; q < n; ++q) {
              if (gathered[q * send.size()] != static_cast<float>(q)) {
                return fail(round, "all-gather", gathered[q * send.size()], q);
              }
            }
            std::vector<float> rs_send(n * 5, 1.0f);
            std::vector<float> rs_recv(5, 0.0f);
            if (absl::Status s =
                    comm.ReduceScatter(comm::HostView(absl::MakeSpan(rs_send)),
                                       comm::HostView(absl::MakeSpan(rs_recv)),
                                       comm::ReduceOp::kSum)
                        ->Wait();
                !s.ok()) {
              return s;
            }
            if (rs_recv[4] != static_cast<float>(n)) {
              return fail(round, "reduce-scatter", rs_recv[4], n);
            }
            if (absl::Status s = comm.Barrier(); !s.ok()) return s;
          }
          return absl::OkStatus();
        });
    EXPECT_TRUE(result.ok()) << n << " ranks: " << result.status();
  }
}

TANDEM_SIM_TEST_BOTH_MODES(SlotReuseTest);

}  // namespace
}  // namespace tandem::sim
