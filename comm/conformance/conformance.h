// The Communicator conformance suite: one set of parameterized tests that
// every backend must pass with the same inputs and the same (exact) results.
//
// A backend joins with one line in its test binary (linking
// //comm/conformance):
//
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(
//       Sim, std::make_shared<tandem::sim::SimLauncher>(),
//       tandem::comm::conformance::SuiteOptions());
//
// An MPI test binary started by `mpirun -np 4` passes an MPI launcher whose
// CanRun() accepts only 4; the other world sizes skip.
//
// Suites:
//   CollectiveConformanceTest: every op (AllReduce, ReduceScatter, AllGather,
//     Broadcast, Send/Recv, Barrier) x every dtype x every valid reduce op x
//     sizes from 0 elements up to SuiteOptions::max_bytes x world sizes x
//     several operations outstanding at once (waited in a rank-dependent
//     order), in place and out of place; results compared bit for bit with
//     comm/conformance/patterns.h.
//   MixedOutstandingTest: different operations in flight together, each
//     rank waiting in its own order.
//   BadInputConformanceTest: every argument error comes back as an
//     already-failed Work whose message says what was expected and what was
//     found, and the communicator stays usable afterwards.
//   OrderedSumConformanceTest: comm/ordered's collectives (built on this
//     engine's Send/Recv and AllGather) give the canonical tree over rank
//     order bit for bit (ordered_cases.cc).
// Every test runs under a Watchdog (comm/conformance/watchdog.h).
#ifndef TANDEM_COMM_CONFORMANCE_CONFORMANCE_H_
#define TANDEM_COMM_CONFORMANCE_CONFORMANCE_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "comm/launcher.h"
#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {

// Send/Recv cases exchange around a ring: rank r sends to r + 1 and receives
// from r - 1. Barrier cases call Barrier() `outstanding` times.
struct CollectiveCase {
  std::shared_ptr<Launcher> launcher = nullptr;
  OpKind op = OpKind::kAllReduce;
  DType dtype = DType::kF32;
  ReduceOp reduce_op = ReduceOp::kSum;  // AllReduce, ReduceScatter
  int world_size = 1;
  // Elements per rank: AllReduce/Broadcast/Send: the buffer; AllGather: the
  // send buffer; ReduceScatter: the recv buffer.
  int64_t count = 0;
  int outstanding = 1;    // operations issued before the first Wait
  int root = 0;           // Broadcast
  bool in_place = false;  // AllGather, ReduceScatter
};

struct SuiteOptions {
  std::vector<int> world_sizes = {1, 2, 3, 4, 8};
  // The largest case moves this many bytes per rank ("S", the total size in
  // nccl-tests' sense). TANDEM_CONFORMANCE_MAX_BYTES overrides it.
  int64_t max_bytes = int64_t{16} << 20;
};

// The full cross product for `launcher` (see the file comment).
std::vector<CollectiveCase> CollectiveCases(std::shared_ptr<Launcher> launcher,
                                            const SuiteOptions& options);

// One world size: the mixed-outstanding and bad-input suites.
struct WorldCase {
  std::shared_ptr<Launcher> launcher = nullptr;
  int world_size = 1;
};
std::vector<WorldCase> WorldCases(std::shared_ptr<Launcher> launcher,
                                  const SuiteOptions& options);

// gtest test-name generators ("AllReduce_f32_sum_n4_c1000_k3").
std::string CollectiveCaseName(
    const ::testing::TestParamInfo<CollectiveCase>& info);
std::string WorldCaseName(const ::testing::TestParamInfo<WorldCase>& info);

void PrintTo(const CollectiveCase& c, std::ostream* os);
void PrintTo(const WorldCase& c, std::ostream* os);

class CollectiveConformanceTest
    : public ::testing::TestWithParam<CollectiveCase> {};
class MixedOutstandingTest : public ::testing::TestWithParam<WorldCase> {};
class BadInputConformanceTest : public ::testing::TestWithParam<WorldCase> {};
class OrderedSumConformanceTest : public ::testing::TestWithParam<WorldCase> {};

}  // namespace tandem::comm::conformance

// Instantiates every conformance suite for one backend. `prefix` is a bare
// identifier (the backend's name), `launcher` an expression giving a
// std::shared_ptr<Launcher>, `options` a SuiteOptions. Use at namespace scope
// (gtest pastes the suite names, so they are brought in by using-
// declarations).
#define TANDEM_INSTANTIATE_COMM_CONFORMANCE(prefix, launcher, options)     \
  using ::tandem::comm::conformance::CollectiveConformanceTest;            \
  using ::tandem::comm::conformance::MixedOutstandingTest;                 \
  using ::tandem::comm::conformance::BadInputConformanceTest;              \
  using ::tandem::comm::conformance::OrderedSumConformanceTest;            \
  INSTANTIATE_TEST_SUITE_P(                                                \
      prefix, CollectiveConformanceTest,                                   \
      ::testing::ValuesIn(::tandem::comm::conformance::CollectiveCases(    \
          (launcher), (options))),                                         \
      ::tandem::comm::conformance::CollectiveCaseName);                    \
  INSTANTIATE_TEST_SUITE_P(                                                \
      prefix, MixedOutstandingTest,                                        \
      ::testing::ValuesIn(                                                 \
          ::tandem::comm::conformance::WorldCases((launcher), (options))), \
      ::tandem::comm::conformance::WorldCaseName);                         \
  INSTANTIATE_TEST_SUITE_P(                                                \
      prefix, BadInputConformanceTest,                                     \
      ::testing::ValuesIn(                                                 \
          ::tandem::comm::conformance::WorldCases((launcher), (options))), \
      ::tandem::comm::conformance::WorldCaseName);                         \
  INSTANTIATE_TEST_SUITE_P(                                                \
      prefix, OrderedSumConformanceTest,                                   \
      ::testing::ValuesIn(                                                 \
          ::tandem::comm::conformance::WorldCases((launcher), (options))), \
      ::tandem::comm::conformance::WorldCaseName)

#endif  // TANDEM_COMM_CONFORMANCE_CONFORMANCE_H_
