// Topologies of GPU clusters for the network clock: alpha-beta links (a
// fixed latency per hop plus bytes over an achievable bandwidth) and named
// presets, each with the sources of its figures.
//
//   absl::StatusOr<sim::cost::Topology> t =
//       sim::cost::MakeTopology("h100-nvlink", /*nodes=*/4,
//                               /*nics_per_node=*/8, /*nic_gbps=*/400);
//   // t->world_size() == 32
//
// A topology is a plain value: copyable, thread-compatible, no hidden state.
#ifndef TANDEM_SIM_COST_TOPOLOGY_H_
#define TANDEM_SIM_COST_TOPOLOGY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::sim::cost {

// One kind of link, in the alpha-beta model: moving b bytes over one hop
// takes latency_us + b / (peak_gbytes_per_s x efficiency).
struct Link {
  // Datasheet bandwidth in one direction, GB/s (1 GB = 1e9 bytes), per GPU
  // (NVLink, PCIe) or per NIC (InfiniBand).
  double peak_gbytes_per_s = 0;
  // The fraction of the peak NCCL's bulk protocol reaches on this link.
  double efficiency = 1;
  // Time of one hop of one pipeline step, microseconds.
  double latency_us = 0;

  // Achievable bandwidth in bytes per second.
  double BytesPerSecond() const;
};

struct Topology {
  std::string name;
  int gpus_per_node = 8;
  int nodes = 1;
  // Each GPU's link into the node's fabric (NVSwitch or PCIe switch).
  Link intra;
  // One NIC; a node has nics_per_node of them. Unused when nodes == 1.
  Link nic;
  int nics_per_node = 0;
  // The node's switch reduces in the network (NVLink SHARP, "NVLS"): only
  // H100-class NVSwitch. Its achievable bandwidth per GPU is `nvls_link`.
  bool nvls = false;
  Link nvls_link;
  // Fixed cost of launching one collective (kernel launch, proxy set-up),
  // microseconds.
  double base_latency_us = 0;

  int world_size() const { return gpus_per_node * nodes; }
};

// The names MakeTopology accepts, in a stable order.
std::vector<std::string> PresetNames();

// A node preset (`preset`, one of PresetNames()) repeated `nodes` times,
// joined by `nics_per_node` NICs of `nic_gbps` Gb/s each (InfiniBand: 200 =
// HDR, 400 = NDR). nodes >= 1; when nodes > 1, 1 <= nics_per_node <= 8 and
// nic_gbps > 0. Errors name the bad argument and the accepted values.
absl::StatusOr<Topology> MakeTopology(absl::string_view preset, int nodes = 1,
                                      int nics_per_node = 8,
                                      double nic_gbps = 400);

// The topology a sub-group of `t`'s GPUs sees (a communicator made by
// Communicator::Split: a pipeline stage's data-parallel replicas, say).
// `ranks` are the members' ranks in `t`, whose GPUs are placed node by node
// (rank r on node r / gpus_per_node). The result has one node per node the
// members touch and, per node, the most members any one node holds; its
// NICs are min(t.nics_per_node, that count): NCCL drives the NICs next to
// the GPUs taking part (one per GPU on rail-optimised nodes), so two of a
// node's eight GPUs do not get all eight NICs. Links, latencies and NVLS are
// `t`'s. Not modelled: other sub-groups using the same NICs at the same
// time. InvalidArgument for an empty list or a rank outside `t`.
absl::StatusOr<Topology> SubTopology(const Topology& t,
                                     const std::vector<int>& ranks);

// "h100-nvlink x 4 nodes, 8 x 400 Gb/s NICs per node" (or "... 1 node").
std::string Describe(const Topology& t);

}  // namespace tandem::sim::cost

#endif  // TANDEM_SIM_COST_TOPOLOGY_H_
