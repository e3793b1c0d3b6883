#include "sim/cost/topology.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace tandem::sim::cost {
namespace {

// Where the figures come from.
//
// Bandwidths (datasheets, one direction):
//   * A100 SXM4: NVLink 3, 12 links x 25 GB/s = 300 GB/s per direction
//     ("600 GB/s" bidirectional in NVIDIA's A100 datasheet), through
//     NVSwitch gen 2 in DGX/HGX A100.
//   * H100 SXM5: NVLink 4, 18 links x 25 GB/s = 450 GB/s per direction
//     ("900 GB/s" bidirectional in NVIDIA's H100 datasheet), NVSwitch gen 3,
//     which can reduce in the switch (NVLink SHARP, NCCL's "NVLS").
//   * PCIe Gen4 x16: 16 GT/s x 16 lanes, 128b/130b = 31.5 GB/s per
//     direction (PCI-SIG base specification 4.0).
//   * InfiniBand HDR 200 Gb/s = 25 GB/s, NDR 400 Gb/s = 50 GB/s per NIC
//     per direction (IBTA data rates).
// Efficiencies (the fraction of the peak NCCL's Simple protocol reaches), one
// per link technology, from published nccl-tests all_reduce_perf busbw at
// large sizes:
//   * NVLink 0.80: 8xA100 reaches about 230 GB/s (0.77 of 300) and 8xH100
//     with NCCL_ALGO=Ring about 370 GB/s (0.82 of 450); one value for both
//     lands within 5 % of each (see
//     https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests for
//     the A100 figure; the H100 ring figure is the one tandem's issue 14
//     quotes).
//   * NVLS 0.68: fitted to the one published NVLS figure, about 460-480 GB/s
//     busbw on 8xH100 (same page); no second source checks it.
//   * InfiniBand 0.94: one 400 Gb/s NIC per node gives about 46-48 GB/s
//     busbw across nodes (0.92-0.96 of 50 GB/s), the usual nccl-tests result
//     on NDR.
//   * PCIe 0.80: the NVLink figure; PCIe boxes vary with their switches and
//     whether peer-to-peer works, so treat this preset as a rough guide.
// Latencies are NCCL's own model (src/graph/tuning.cc, hwLat and baseLat for
// the Simple protocol): a few microseconds to launch a collective, under a
// microsecond per NVLink hop, a few per network hop.
constexpr double kNvlinkEfficiency = 0.80;
constexpr double kNvlsEfficiency = 0.68;
constexpr double kInfinibandEfficiency = 0.94;
constexpr double kPcieEfficiency = 0.80;

constexpr double kNvlinkHopUs = 0.6;
constexpr double kPcieHopUs = 1.0;
constexpr double kNetworkHopUs = 5.0;
constexpr double kBaseLatencyUs = 6.0;

Topology A100Nvlink() {
  Topology t;
  t.name = "a100-nvlink";
  t.intra = {300.0, kNvlinkEfficiency, kNvlinkHopUs};
  t.base_latency_us = kBaseLatencyUs;
  return t;
}

Topology H100Nvlink(bool nvls) {
  Topology t;
  t.name = nvls ? "h100-nvls" : "h100-nvlink";
  t.intra = {450.0, kNvlinkEfficiency, kNvlinkHopUs};
  t.nvls = nvls;
  t.nvls_link = {450.0, kNvlsEfficiency, kNvlinkHopUs};
  t.base_latency_us = kBaseLatencyUs;
  return t;
}

Topology PcieGen4() {
  Topology t;
  t.name = "pcie-gen4";
  t.intra = {31.5, kPcieEfficiency, kPcieHopUs};
  t.base_latency_us = kBaseLatencyUs;
  return t;
}

}  // namespace

double Link::BytesPerSecond() const {
  return peak_gbytes_per_s * efficiency * 1e9;
}

std::vector<std::string> PresetNames() {
  return {"a100-nvlink", "h100-nvlink", "h100-nvls", "pcie-gen4"};
}

absl::StatusOr<Topology> MakeTopology(absl::string_view preset, int nodes,
                                      int nics_per_node, double nic_gbps) {
  Topology t;
  if (preset == "a100-nvlink") {
    t = A100Nvlink();
  } else if (preset == "h100-nvlink") {
    t = H100Nvlink(/*nvls=*/false);
  } else if (preset == "h100-nvls") {
    t = H100Nvlink(/*nvls=*/true);
  } else if (preset == "pcie-gen4") {
    t = PcieGen4();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown topology preset '", preset, "'; expected one of ",
                     absl::StrJoin(PresetNames(), ", ")));
  }
  if (nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodes must be at least 1; found ", nodes));
  }
  t.nodes = nodes;
  if (nodes > 1) {
    if (nics_per_node < 1 || nics_per_node > 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a node of 8 GPUs has 1 to 8 NICs; found nics_per_node = ",
          nics_per_node));
    }
    if (!(nic_gbps > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the NIC speed must be positive Gb/s (200: HDR, 400: NDR); found ",
          nic_gbps));
    }
    t.nics_per_node = nics_per_node;
    t.nic = {nic_gbps / 8.0, kInfinibandEfficiency, kNetworkHopUs};
  }
  return t;
}

absl::StatusOr<Topology> SubTopology(const Topology& t,
                                     const std::vector<int>& ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError(
        "SubTopology: the sub-group has no members");
  }
  std::map<int, int> members_on_node;
  for (int r : ranks) {
    if (r < 0 || r >= t.world_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SubTopology: rank ", r, " is not in ", Describe(t),
                       " (ranks 0..", t.world_size() - 1, ")"));
    }
    ++members_on_node[r / t.gpus_per_node];
  }
  Topology sub = t;
  sub.nodes = static_cast<int>(members_on_node.size());
  sub.gpus_per_node = 0;
  for (const auto& [node, count] : members_on_node) {
    sub.gpus_per_node = std::max(sub.gpus_per_node, count);
  }
  sub.nics_per_node = std::min(t.nics_per_node, sub.gpus_per_node);
  return sub;
}

std::string Describe(const Topology& t) {
  if (t.nodes == 1) return absl::StrCat(t.name, " x 1 node");
  return absl::StrCat(t.name, " x ", t.nodes, " nodes, ", t.nics_per_node,
                      " x ", t.nic.peak_gbytes_per_s * 8,
                      " Gb/s NICs per node");
}

}  // namespace tandem::sim::cost
