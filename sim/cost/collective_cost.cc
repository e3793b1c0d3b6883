#include "sim/cost/collective_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "comm/types.h"
#include "sim/cost/topology.h"

namespace tandem::sim::cost {
namespace {

constexpr double kUs = 1e-6;

// The bottleneck bandwidth of a ring or tree over every rank, bytes/s.
double BottleneckBytesPerSecond(const Topology& t) {
  double b = t.intra.BytesPerSecond();
  if (t.nodes > 1) {
    b = std::min(b, t.nics_per_node * t.nic.BytesPerSecond());
  }
  return b;
}

// The latency of one pipeline step, seconds: the slowest hop's.
double StepSeconds(const Topology& t) {
  double us = t.intra.latency_us;
  if (t.nodes > 1) us = std::max(us, t.nic.latency_us);
  return us * kUs;
}

// Depth of the tree: a chain of gpus_per_node inside a node plus a binary
// tree over the nodes, in latency (seconds).
double TreeDepthSeconds(const Topology& t) {
  double s = (t.gpus_per_node - 1) * t.intra.latency_us * kUs;
  if (t.nodes > 1) {
    s += std::ceil(std::log2(static_cast<double>(t.nodes))) * t.nic.latency_us *
         kUs;
  }
  return s;
}

bool HasTree(comm::OpKind op) {
  return op == comm::OpKind::kAllReduce || op == comm::OpKind::kBroadcast ||
         op == comm::OpKind::kBarrier;
}

bool HasNvls(const Topology& t, comm::OpKind op) {
  return t.nvls && t.nodes == 1 &&
         (op == comm::OpKind::kAllReduce || op == comm::OpKind::kBarrier);
}

double Ring(const Topology& t, comm::OpKind op, double s) {
  const double n = t.world_size();
  const double base = t.base_latency_us * kUs;
  const double step = StepSeconds(t);
  const double b = BottleneckBytesPerSecond(t);
  switch (op) {
    case comm::OpKind::kAllReduce:
    case comm::OpKind::kBarrier:
      return base + 2 * (n - 1) * step + 2 * (n - 1) / n * s / b;
    case comm::OpKind::kAllGather:
    case comm::OpKind::kReduceScatter:
      return base + (n - 1) * step + (n - 1) / n * s / b;
    case comm::OpKind::kBroadcast:
      return base + (n - 1) * step + s / b;
    case comm::OpKind::kSend:
    case comm::OpKind::kRecv:
      break;
  }
  return 0;
}

double Tree(const Topology& t, comm::OpKind op, double s) {
  const double base = t.base_latency_us * kUs;
  const double b = BottleneckBytesPerSecond(t);
  if (op == comm::OpKind::kBroadcast) {
    return base + TreeDepthSeconds(t) + s / b;
  }
  // Up and down: twice the depth, and S each way.
  return base + 2 * TreeDepthSeconds(t) + 2 * s / b;
}

double Nvls(const Topology& t, double s) {
  const double n = t.world_size();
  // Two switch round trips (load-reduce, multicast store).
  return t.base_latency_us * kUs + 4 * t.nvls_link.latency_us * kUs +
         s * (1 + 1 / n) / t.nvls_link.BytesPerSecond();
}

}  // namespace

std::string AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kNvls:
      return "nvls";
  }
  return "?";
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kTree,
                      Algorithm::kNvls}) {
    if (name == AlgorithmName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown algorithm '", name, "'; expected auto, ring, tree or nvls"));
}

absl::StatusOr<double> CollectiveSeconds(const Topology& t, comm::OpKind op,
                                         int64_t bytes, Algorithm algorithm) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bytes must be >= 0; found ", bytes));
  }
  if (op == comm::OpKind::kSend || op == comm::OpKind::kRecv) {
    return absl::InvalidArgumentError(
        "Send/Recv have no collective algorithm; use PointToPointSeconds");
  }
  if (t.world_size() <= 1) return 0.0;
  const double s = static_cast<double>(bytes);
  switch (algorithm) {
    case Algorithm::kAuto: {
      const Algorithm best = BestAlgorithm(t, op, bytes);
      return CollectiveSeconds(t, op, bytes, best);
    }
    case Algorithm::kRing:
      return Ring(t, op, s);
    case Algorithm::kTree:
      if (!HasTree(op)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "NCCL has no tree ", comm::OpKindName(op),
            "; use ring (tree exists for AllReduce and Broadcast)"));
      }
      return Tree(t, op, s);
    case Algorithm::kNvls:
      if (!HasNvls(t, op)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "nvls ", comm::OpKindName(op), " is not available on ", Describe(t),
            "; it needs a single node whose NVSwitch reduces (preset "
            "h100-nvls) and an AllReduce; use ring or tree"));
      }
      return Nvls(t, s);
  }
  return absl::InternalError("unreachable algorithm");
}

Algorithm BestAlgorithm(const Topology& t, comm::OpKind op, int64_t bytes) {
  const double s = static_cast<double>(std::max<int64_t>(bytes, 0));
  Algorithm best = Algorithm::kRing;
  double best_s = Ring(t, op, s);
  if (HasTree(op)) {
    const double tree = Tree(t, op, s);
    if (tree < best_s) {
      best = Algorithm::kTree;
      best_s = tree;
    }
  }
  if (HasNvls(t, op) && Nvls(t, s) < best_s) best = Algorithm::kNvls;
  return best;
}

double PointToPointSeconds(const Topology& t, int src, int dst, int64_t bytes) {
  if (src == dst) return 0;
  const bool same_node = src / t.gpus_per_node == dst / t.gpus_per_node;
  const Link& link = same_node ? t.intra : t.nic;
  return (t.base_latency_us + link.latency_us) * kUs +
         static_cast<double>(std::max<int64_t>(bytes, 0)) /
             link.BytesPerSecond();
}

}  // namespace tandem::sim::cost
