// The time one collective takes on a Topology, with the algorithms NCCL uses:
//
//   ring   AllReduce: reduce-scatter then all-gather around a ring of all n
//          ranks, 2(n-1) pipeline steps, each rank sends 2(n-1)/n x S.
//          AllGather / ReduceScatter: one pass, n-1 steps, (n-1)/n x S.
//          Broadcast: a pipelined chain, n-1 steps, S.
//   tree   AllReduce: reduce up and broadcast down a tree (a chain inside a
//          node, a binary tree across nodes, NCCL's double binary tree), 2
//          x depth latency, each rank sends about 2 x S / 2 per direction, so
//          the same bandwidth term as a ring at large n and a latency that
//          grows with log2(nodes) instead of n. Broadcast: down the tree.
//          NCCL has no tree all-gather or reduce-scatter (an error here).
//   nvls   single-node AllReduce on an NVSwitch that reduces (NVLink SHARP):
//          each GPU sends S + S/n and receives S/n + S, a constant number of
//          hops.
// S is the nccl-tests "size" (comm/bandwidth.h): the buffer of each rank for
// AllReduce and Broadcast, the total (n x the per-rank part) for AllGather
// and ReduceScatter, the message for Send/Recv.
//
// The bottleneck bandwidth B of a ring or tree is min(one GPU's intra-node
// link, all of a node's NICs together): every ring crosses each node
// boundary once, and NCCL spreads the rings over the NICs, so a node's NICs
// carry as much as one GPU's link does (nccl-tests busbw is bounded by
// nics_per_node x NIC bandwidth across nodes). A step's latency is the
// slowest hop's: the network's when the ranks span nodes.
//
//   absl::StatusOr<double> s = cost::CollectiveSeconds(
//       topology, comm::OpKind::kAllReduce, /*bytes=*/1 << 30,
//       cost::Algorithm::kAuto);
//
// Pure functions of their arguments; thread-safe.
#ifndef TANDEM_SIM_COST_COLLECTIVE_COST_H_
#define TANDEM_SIM_COST_COLLECTIVE_COST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm/types.h"
#include "sim/cost/topology.h"

namespace tandem::sim::cost {

enum class Algorithm {
  kAuto,  // the fastest applicable algorithm, as NCCL's tuner picks
  kRing,
  kTree,
  kNvls,
};

// "auto", "ring", "tree", "nvls".
std::string AlgorithmName(Algorithm a);
absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name);

// Seconds for `op` moving `bytes` (S above) among all topology.world_size()
// ranks with `algorithm`. Zero for a world of one rank or a Send/Recv of a
// rank to itself. Errors: negative bytes, or an algorithm the op or the
// topology does not have (tree all-gather; nvls on a switch without it or
// across nodes), naming what is available.
absl::StatusOr<double> CollectiveSeconds(const Topology& topology,
                                         comm::OpKind op, int64_t bytes,
                                         Algorithm algorithm);

// The algorithm kAuto resolves to for `op` and `bytes` (the fastest; ties go
// to ring, then tree, then nvls).
Algorithm BestAlgorithm(const Topology& topology, comm::OpKind op,
                        int64_t bytes);

// Seconds for a message of `bytes` from rank `src` to rank `dst` (one hop:
// NVLink/PCIe inside a node, a NIC between nodes).
double PointToPointSeconds(const Topology& topology, int src, int dst,
                           int64_t bytes);

}  // namespace tandem::sim::cost

#endif  // TANDEM_SIM_COST_COLLECTIVE_COST_H_
