#include "bench/predict/gpt_schedule.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/nn/models/gpt.h"

namespace tandem::bench {
namespace {

// One communicator stream: a collective starts when issued and the
// previous one is done. Returns its end.
struct Stream {
  double free_at = 0;
  double busy = 0;
  int64_t count = 0;
  absl::StatusOr<double> Run(const sim::cost::Topology& t, comm::OpKind op,
                             int64_t bytes, sim::cost::Algorithm a,
                             double issued) {
    TANDEM_ASSIGN_OR_RETURN(double s,
                            sim::cost::CollectiveSeconds(t, op, bytes, a));
    free_at = std::max(free_at, issued) + s;
    busy += s;
    ++count;
    return free_at;
  }
};

// The algorithm for a collective: `a`, or what auto resolves to where `a`
// does not apply (NVLS and tree have no all-gather / reduce-scatter).
sim::cost::Algorithm For(const sim::cost::Topology& t, comm::OpKind op,
                         int64_t bytes, sim::cost::Algorithm a) {
  if (op != comm::OpKind::kAllReduce && a != sim::cost::Algorithm::kRing) {
    return sim::cost::BestAlgorithm(t, op, bytes);
  }
  return a;
}

}  // namespace

absl::StatusOr<GptStepPrediction> PredictGpt2Step(
    const sim::cost::Topology& topology, const GptStepConfig& config) {
  const nn::GptConfig g = nn::GptConfig::Gpt2();
  if (config.batch < 1 || config.block < 1 || config.block > g.block_size ||
      !(config.tflops > 0) || config.bucket_cap_mb < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PredictGpt2Step: batch ", config.batch, ", block ", config.block,
        ", tflops ", config.tflops, ", bucket_cap_mb ", config.bucket_cap_mb,
        "; expected batch >= 1, 1 <= block <= ", g.block_size,
        ", tflops > 0, bucket_cap_mb >= 1"));
  }
  const int64_t n = topology.world_size();
  const int64_t C = g.n_embd, L = g.n_layer, V = g.vocab_size;
  const double tokens = static_cast<double>(config.batch * config.block);
  const double flops_per_s = config.tflops * 1e12;
  // Forward seconds of one block and of the head; backward is twice.
  const double block_fwd =
      tokens * (2.0 * 12 * C * C + 4.0 * config.block * C) / flops_per_s;
  const double head_fwd = tokens * 2.0 * V * C / flops_per_s;
  // Parameters (elements), in the model's order.
  const int64_t wte = V * C, wpe = g.block_size * C, ln_f = 2 * C;
  const int64_t block = 12 * C * C + 13 * C;
  GptStepPrediction out;
  out.compute_s = 3 * (L * block_fwd + head_fwd);
  Stream stream;
  auto run = [&](comm::OpKind op, int64_t elements,
                 double issued) -> absl::StatusOr<double> {
    const int64_t bytes = 4 * elements;
    return stream.Run(topology, op, bytes,
                      For(topology, op, bytes, config.algorithm), issued);
  };
  double t = 0;  // compute time line
  if (!config.fsdp) {
    // Forward, then backward: the head, the blocks from the last, then the
    // embeddings. Gradients become final in reverse parameter order (wte,
    // the first parameter, last) and fill buckets of bucket_cap_mb.
    t = L * block_fwd + head_fwd;
    struct Ready {
      int64_t elements;
      double at;
    };
    std::vector<Ready> grads;  // in the order they become final
    t += 2 * head_fwd;
    grads.push_back({ln_f, t});
    for (int64_t k = L - 1; k >= 0; --k) {
      t += 2 * block_fwd;
      grads.push_back({block, t});
    }
    grads.push_back({wpe, t});
    grads.push_back({wte, t});
    const int64_t cap = config.bucket_cap_mb * (int64_t{1} << 20) / 4;
    int64_t filled = 0;
    double done = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      filled += grads[i].elements;
      if (filled >= cap || i + 1 == grads.size()) {
        TANDEM_ASSIGN_OR_RETURN(
            done, run(comm::OpKind::kAllReduce, filled, grads[i].at));
        filled = 0;
      }
    }
    out.step_s = std::max(t, done);
  } else {
    auto padded = [n](int64_t e) { return (e + n - 1) / n * n; };
    const int64_t root = padded(wte + wpe + ln_f), unit = padded(block);
    // Forward: the root, then each block gathered while the previous runs.
    TANDEM_ASSIGN_OR_RETURN(double gathered,
                            run(comm::OpKind::kAllGather, root, 0));
    t = gathered;
    TANDEM_ASSIGN_OR_RETURN(double next,
                            run(comm::OpKind::kAllGather, unit, t));
    for (int64_t k = 0; k < L; ++k) {
      t = std::max(t, next);  // wait for block k
      if (k + 1 < L) {
        TANDEM_ASSIGN_OR_RETURN(next, run(comm::OpKind::kAllGather, unit, t));
      }
      t += block_fwd;
    }
    t += head_fwd;
    // Backward: the root stays gathered; the last block is prefetched when
    // the head's backward starts; each block's reduce-scatter follows its
    // backward on the same stream.
    TANDEM_ASSIGN_OR_RETURN(next, run(comm::OpKind::kAllGather, unit, t));
    t += 2 * head_fwd;
    double reduced = 0;
    for (int64_t k = L - 1; k >= 0; --k) {
      t = std::max(t, next);
      if (k > 0) {
        TANDEM_ASSIGN_OR_RETURN(next, run(comm::OpKind::kAllGather, unit, t));
      }
      t += 2 * block_fwd;
      TANDEM_ASSIGN_OR_RETURN(reduced,
                              run(comm::OpKind::kReduceScatter, unit, t));
    }
    TANDEM_ASSIGN_OR_RETURN(reduced,
                            run(comm::OpKind::kReduceScatter, root, t));
    out.step_s = std::max(t, reduced);
  }
  out.comm_s = stream.busy;
  out.collectives = stream.count;
  out.exposed_comm_s = out.step_s - out.compute_s;
  return out;
}

}  // namespace tandem::bench
