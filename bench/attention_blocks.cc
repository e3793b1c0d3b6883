// Attention's f32 CPU kernels (tensor/cpu/avx2/attention_avx2.h) at one shape,
// for each size of query-row block the causal GEMMs are cut into: the thread
// CPU time of a forward and of a backward (the least of --repeats runs),
// and the GEMM rate it comes to over the FLOPs the blocks compute. The
// default shape is one rank's attention in bench/compare's GPT claim (batch
// 8 x 6 heads, T = 256, head size 64); one thread, so other load on the
// machine slows every block size alike instead of skewing one.
//
//   bazel-bin/bench/attention_blocks --bh=48 --t=256 --hd=64 --repeats=5
//
// Exit 2 on a usage error (base/command_line.h), 1 when a kernel fails.
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "tensor/cpu/avx2/attention_avx2.h"

ABSL_FLAG(int64_t, bh, 48, "Batch x heads: independent attention problems.");
ABSL_FLAG(int64_t, t, 256, "Sequence length.");
ABSL_FLAG(int64_t, hd, 64, "Head size.");
ABSL_FLAG(int64_t, repeats, 5,
          "Timed runs per direction and block size; the least counts.");

namespace tandem::bench {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

template <typename F>
absl::StatusOr<double> LeastSeconds(int64_t repeats, F&& run) {
  double best = 1e300;
  for (int64_t i = 0; i < repeats + 1; ++i) {  // the first run warms up
    const double start = ThreadCpuSeconds();
    TANDEM_RETURN_IF_ERROR(run());
    if (i > 0) best = std::min(best, ThreadCpuSeconds() - start);
  }
  return best;
}

int Run() {
  const int64_t bh = absl::GetFlag(FLAGS_bh), t = absl::GetFlag(FLAGS_t),
                hd = absl::GetFlag(FLAGS_hd),
                repeats = absl::GetFlag(FLAGS_repeats);
  if (!internal::AttentionAvx2Usable(hd)) {
    std::fprintf(stderr,
                 "attention_blocks: this CPU lacks AVX2 + FMA (or --hd < 1); "
                 "the kernels measured here would not run\n");
    return 1;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  auto random = [&](int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = normal(rng);
    return x;
  };
  const int64_t n = bh * t * hd;
  const std::vector<float> q = random(n), k = random(n), v = random(n),
                           gy = random(n);
  std::vector<float> probs(static_cast<size_t>(bh * t * t)),
      y(static_cast<size_t>(n)), gq(y), gk(y), gv(y);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::printf(
      "bh %ld, T %ld, head size %ld, causal, no dropout; CPU ms per "
      "call (GFLOP/s over the computed blocks)\n",
      static_cast<long>(bh), static_cast<long>(t), static_cast<long>(hd));
  std::printf("%9s %18s %18s %18s\n", "row_block", "forward", "backward",
              "both");
  for (int64_t rb : {16, 32, 64, 128, 256}) {
    if (rb > t && rb != 16) continue;
    // Products of the blocks: per block rows x keys x hd, two in forward
    // (q k^T, A v), four in backward (dA, gq, gk, gv).
    double block_macs = 0;
    for (int64_t i0 = 0; i0 < t; i0 += rb) {
      const int64_t i1 = std::min(i0 + rb, t);
      block_macs += static_cast<double>((i1 - i0) * i1 * hd);
    }
    const double flops = 2 * block_macs * static_cast<double>(bh);
    absl::StatusOr<double> fwd = LeastSeconds(repeats, [&] {
      return internal::AttentionForwardAvx2(q.data(), k.data(), v.data(),
                                            nullptr, bh, t, hd, true, scale,
                                            probs.data(), y.data(), rb);
    });
    absl::StatusOr<double> bwd = LeastSeconds(repeats, [&] {
      return internal::AttentionBackwardAvx2(
          gy.data(), q.data(), k.data(), v.data(), probs.data(), nullptr, bh, t,
          hd, true, scale, gq.data(), gk.data(), gv.data(), rb);
    });
    if (!fwd.ok() || !bwd.ok()) {
      std::fprintf(stderr, "attention_blocks: %s\n",
                   (fwd.ok() ? bwd.status() : fwd.status()).ToString().c_str());
      return 1;
    }
    std::printf("%9ld %9.2f (%5.1f) %9.2f (%5.1f) %9.2f (%5.1f)\n",
                static_cast<long>(rb), 1e3 * *fwd, 2 * flops / *fwd / 1e9,
                1e3 * *bwd, 4 * flops / *bwd / 1e9, 1e3 * (*fwd + *bwd),
                6 * flops / (*fwd + *bwd) / 1e9);
  }
  return 0;
}

}  // namespace
}  // namespace tandem::bench

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "attention_blocks",
           .summary = "Times attention's f32 CPU kernels (causal GEMMs over "
                      "query-row blocks) for each block size: thread CPU "
                      "time, one thread.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  for (const absl::Status& s :
       {tandem::bench::CheckInt("--bh", absl::GetFlag(FLAGS_bh), 1, 4096),
        tandem::bench::CheckInt("--t", absl::GetFlag(FLAGS_t), 1, 4096),
        tandem::bench::CheckInt("--hd", absl::GetFlag(FLAGS_hd), 1, 1024),
        tandem::bench::CheckInt("--repeats", absl::GetFlag(FLAGS_repeats), 1,
                                100)}) {
    if (!s.ok()) {
      std::fprintf(stderr, "attention_blocks: %s\n",
                   std::string(s.message()).c_str());
      return tandem::kExitUsageError;
    }
  }
  return tandem::bench::Run();
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("attention_blocks")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("attention_blocks", Run(argc, argv));
}
