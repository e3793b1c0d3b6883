// The nccl-tests all-reduce sweep every multi-process tandem benchmark prints
// (comm_benchmark_mpi, comm_benchmark_gloo), timed as nccl-tests and the
// PyTorch/OpenMPI peers: per size, one warm-up operation, a two-operation
// probe that sets the iteration count for about `target_seconds` of work (the
// same count on every rank: the probe is max-reduced), then `iters`
// back-to-back operations between barriers; the time of one operation is the
// slowest rank's elapsed / iters. The result is then checked with exact
// values (rank r contributes r * 8 + i % 7 at element i) and wrong elements,
// summed over ranks, are printed in #wrong. Rank 0 prints the table.
#ifndef TANDEM_BENCH_ALLREDUCE_SWEEP_H_
#define TANDEM_BENCH_ALLREDUCE_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace tandem::bench {

struct AllReduceSweep {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  double target_seconds = 0.2;
  // Before the first size, that size's all-reduce untimed for about this
  // many seconds (0: none): the first second of a run is slower here.
  double warmup_seconds = 0;
  // The table's first line, printed by rank 0 ("# tandem ... AllReduce").
  std::string title;
  // One in-place f32 sum of buf[0, count); default: comm.AllReduce + Wait.
  std::function<absl::Status(std::vector<float>& buf, int64_t count)> once;
};

absl::Status RunAllReduceSweep(comm::Communicator& comm,
                               const AllReduceSweep& sweep);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_ALLREDUCE_SWEEP_H_
