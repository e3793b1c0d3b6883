// Bandwidth arithmetic and the results table shared by every communication
// benchmark, following nccl-tests (doc/PERFORMANCE.md there):
//
//   algbw = S / t                         (GB/s, 1 GB = 1e9 bytes)
//   busbw = algbw x factor(op, n)
//     AllReduce      2(n-1)/n
//     ReduceScatter  (n-1)/n   S is the total size: n x the recv buffer
//     AllGather      (n-1)/n   S is the total size: the recv buffer
//     Broadcast      1
//     Send/Recv      1
// busbw is comparable across world sizes and with the hardware's link speed;
// algbw is what a user waiting on the operation sees.
//
//   comm::BandwidthTable table(comm::OpKind::kAllReduce, /*world_size=*/2);
//   std::fputs(table.Header().c_str(), stdout);
//   std::fputs(table.Row({.bytes = 4096, .count = 1024,
//                         .dtype = comm::DType::kF32,
//                         .redop = comm::ReduceOp::kSum,
//                         .seconds = 1.2e-6, .wrong = 0}).c_str(), stdout);
//
// prints
// clang-format off
//   #       size         count      type   redop |     time   algbw   busbw  #wrong
//   #        (B)    (elements)                   |     (us)  (GB/s)  (GB/s)
//           4096          1024       f32     sum |     1.20    3.41    3.41       0
// clang-format on
#ifndef TANDEM_COMM_BANDWIDTH_H_
#define TANDEM_COMM_BANDWIDTH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "comm/types.h"

namespace tandem::comm {

// The busbw factor of `op` at `world_size` ranks (0 for Barrier: it moves no
// data).
double BusBandwidthFactor(OpKind op, int world_size);

// S / t in GB/s; 0 when seconds <= 0.
double AlgBandwidthGBps(int64_t bytes, double seconds);

// AlgBandwidthGBps x BusBandwidthFactor.
double BusBandwidthGBps(OpKind op, int world_size, int64_t bytes,
                        double seconds);

// One line of results.
struct BandwidthRow {
  int64_t bytes = 0;  // S, the total size as above ("size" column)
  int64_t count = 0;  // elements each rank contributes ("count" column)
  DType dtype = DType::kF32;
  std::optional<ReduceOp> redop;  // printed as "none" when absent
  double seconds = 0;             // time of one operation
  int64_t wrong = 0;              // elements found wrong; < 0 prints "N/A"
};

// Formats the nccl-tests table `size count type redop | time algbw busbw
// #wrong` for one op and world size. Stateless apart from those two; thread-
// compatible.
class BandwidthTable {
 public:
  BandwidthTable(OpKind op, int world_size);

  // Two comment lines (names, units), each ending in '\n'.
  std::string Header() const;
  // One line, ending in '\n'.
  std::string Row(const BandwidthRow& row) const;

 private:
  OpKind op_;
  int world_size_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_BANDWIDTH_H_
