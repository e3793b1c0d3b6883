// ResNet's convolutions pass by pass: for every convolution of torchvision's
// resnet18 at one input size and batch, the CPU time of tandem's default
// kernels (tensor/cpu/conv_gemm.h: forward, backward-data, backward-weights)
// and of oneDNN's primitives made as PyTorch 1.13 makes them
// (tensor/cpu/onednn_conv.h, what PyTorch's DDP peer runs), measured
// alternately in the same process on one thread. Prints one line per layer
// and the totals per step; thread CPU time, so other load on the machine
// slows both sides alike instead of skewing one.
//
//   bazel-bin/bench/conv_split --image_size=32 --batch=32 --repeats=5
//
// Exit 2 on a usage error (base/command_line.h), 1 when a kernel fails.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "tensor/cpu/conv_gemm.h"
#include "tensor/cpu/onednn_conv.h"

ABSL_FLAG(int64_t, image_size, 32, "Input images are this many pixels square.");
ABSL_FLAG(int64_t, batch, 32, "Images per batch (one rank's batch).");
ABSL_FLAG(int64_t, repeats, 5,
          "Timed runs per pass; the least CPU time counts.");

namespace tandem::bench {
namespace {

struct Layer {
  std::string name;
  cpu::ConvProblem problem;
  int count;  // how many convolutions of this shape resnet18 has
};

cpu::ConvProblem Conv(int64_t c, int64_t hw, int64_t o, int64_t k,
                      int64_t stride, int64_t batch) {
  return {{.channels = c,
           .height = hw,
           .width = hw,
           .kernel_h = k,
           .kernel_w = k,
           .stride_h = stride,
           .stride_w = stride,
           .pad_h = k / 2,
           .pad_w = k / 2},
          batch,
          o};
}

// torchvision's resnet18: the 7x7 stem, then four stages of two
// BasicBlocks (the first block of stages 2-4 strides and has a 1x1
// downsample convolution).
std::vector<Layer> Resnet18(int64_t size, int64_t batch) {
  std::vector<Layer> layers;
  layers.push_back({"stem 7x7", Conv(3, size, 64, 7, 2, batch), 1});
  int64_t hw = (size + 1) / 2;
  hw = (hw + 1) / 2;  // max pool 3x3 stride 2 pad 1
  layers.push_back({"layer1 3x3", Conv(64, hw, 64, 3, 1, batch), 4});
  int64_t c = 64;
  for (int stage = 2; stage <= 4; ++stage) {
    const int64_t o = c * 2;
    const std::string s = "layer" + std::to_string(stage);
    layers.push_back({s + " 3x3 s2", Conv(c, hw, o, 3, 2, batch), 1});
    layers.push_back({s + " 1x1 s2", Conv(c, hw, o, 1, 2, batch), 1});
    hw = (hw + 1) / 2;
    layers.push_back({s + " 3x3", Conv(o, hw, o, 3, 1, batch), 3});
    c = o;
  }
  return layers;
}

double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The least CPU time of `repeats` runs of `fn` (after one warm-up run).
double Best(int repeats, const std::function<absl::Status()>& fn,
            absl::Status& status) {
  double best = 1e30;
  for (int r = 0; r <= repeats && status.ok(); ++r) {
    const double start = ThreadSeconds();
    status = fn();
    if (r > 0) best = std::min(best, ThreadSeconds() - start);
  }
  return best;
}

int Run(int64_t size, int64_t batch, int repeats) {
  double total[2][3] = {};
  absl::Status status;
  std::printf(
      "%-16s %5s | %-27s | %-27s\n%-16s %5s | %8s %8s %9s | %8s %8s %9s\n",
      "resnet18 conv", "", "tandem conv_gemm (ms)", "oneDNN primitives (ms)",
      "", "count", "fwd", "bwd-data", "bwd-wt", "fwd", "bwd-data", "bwd-wt");
  for (const Layer& layer : Resnet18(size, batch)) {
    const cpu::ConvProblem& p = layer.problem;
    const cpu::ConvGeometry& g = p.geometry;
    std::vector<float> x(p.batch * g.channels * g.height * g.width, 0.5f);
    std::vector<float> w(p.out_channels * g.col_rows(), 0.25f);
    std::vector<float> y(p.batch * p.out_channels * g.col_cols(), 0.f);
    std::vector<float> dy(y.size(), 0.125f), dx(x.size()), dw(w.size());
    const std::function<absl::Status()> passes[2][3] = {
        {[&] {
           return cpu::ConvGemmForward<float>(p, x.data(), w.data(), nullptr,
                                              y.data());
         },
         [&] {
           return cpu::ConvGemmBackward<float>(p, x.data(), w.data(), dy.data(),
                                               nullptr, false, dx.data(),
                                               false);
         },
         [&] {
           return cpu::ConvGemmBackward<float>(p, x.data(), w.data(), dy.data(),
                                               dw.data(), false, nullptr,
                                               false);
         }},
        {[&] {
           return cpu::OneDnnConvForward(p, x.data(), w.data(), nullptr,
                                         y.data());
         },
         [&] {
           return cpu::OneDnnConvBackwardData(p, w.data(), dy.data(),
                                              dx.data());
         },
         [&] {
           return cpu::OneDnnConvBackwardWeights(p, x.data(), dy.data(),
                                                 dw.data(), nullptr);
         }}};
    double ms[2][3];
    for (int pass = 0; pass < 3; ++pass) {
      for (int side = 0; side < 2; ++side) {  // alternate: same conditions
        ms[side][pass] = 1e3 * Best(repeats, passes[side][pass], status);
        total[side][pass] += layer.count * ms[side][pass];
      }
    }
    if (!status.ok()) {
      std::fprintf(stderr, "conv_split: %s failed: %s\n", layer.name.c_str(),
                   std::string(status.message()).c_str());
      return 1;
    }
    std::printf("%-16s %5d | %8.2f %8.2f %9.2f | %8.2f %8.2f %9.2f\n",
                layer.name.c_str(), layer.count, ms[0][0], ms[0][1], ms[0][2],
                ms[1][0], ms[1][1], ms[1][2]);
  }
  std::printf("%-16s %5s | %8.1f %8.1f %9.1f | %8.1f %8.1f %9.1f\n",
              "per step (ms)", "", total[0][0], total[0][1], total[0][2],
              total[1][0], total[1][1], total[1][2]);
  const double ours = total[0][0] + total[0][1] + total[0][2];
  const double theirs = total[1][0] + total[1][1] + total[1][2];
  std::printf(
      "all passes: tandem %.1f ms, oneDNN %.1f ms per step; oneDNN / tandem "
      "= %.2f\n",
      ours, theirs, theirs / ours);
  return 0;
}

}  // namespace
}  // namespace tandem::bench

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "conv_split",
           .summary = "Times resnet18's convolutions pass by pass (forward, "
                      "backward-data, backward-weights): tandem's default "
                      "kernels against oneDNN's primitives as PyTorch makes "
                      "them, thread CPU time, one thread.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t size = absl::GetFlag(FLAGS_image_size);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t repeats = absl::GetFlag(FLAGS_repeats);
  for (const absl::Status& s :
       {tandem::bench::CheckInt("--image_size", size, 8, 512),
        tandem::bench::CheckInt("--batch", batch, 1, 256),
        tandem::bench::CheckInt("--repeats", repeats, 1, 100)}) {
    if (!s.ok()) {
      std::fprintf(stderr, "conv_split: %s\n",
                   std::string(s.message()).c_str());
      return tandem::kExitUsageError;
    }
  }
  return tandem::bench::Run(size, batch, static_cast<int>(repeats));
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("conv_split")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("conv_split", Run(argc, argv));
}
