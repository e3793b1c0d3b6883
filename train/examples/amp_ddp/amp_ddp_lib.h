// The PyTorch AMP tutorial's snippet under DDP, as a function every rank
// runs; amp_ddp_main.cc wraps it in a command line.
//
//   scaler = GradScaler()
//   with autocast():
//       output = model(input_data); loss = criterion(output, target)
//   optimizer.zero_grad(); scaler.scale(loss).backward()
//   scaler.step(optimizer); scaler.update()
//
// Each rank: Linear(10, 10) initialised from `seed` (the same on every
// rank; DDP broadcasts rank 0's anyway), MSE loss, SGD lr 0.001, a batch of
// random inputs and targets per step from seed + 1000 + rank; autocast in
// `amp` (off, bf16, f16) on the rank's device; a GradScaler (enabled unless
// amp is off) whose found_inf is combined across ranks
// (train/parallel/core/found_inf.h); DDP with `comm_hook`. Per step every rank
// prints one line, then its weights' checksum at the end:
//
//   [GPU1] step 002 | loss 1.0412598 | scale 32768 | skipped
//   [GPU1] weights checksum -0.5207453966
//
// `inject_inf` (RANK:STEP) puts an inf into ONE rank's gradient after the
// all-reduce at one step (0-based): every rank skips that step and halves its
// scale, and the checksums stay equal.
#ifndef TANDEM_TRAIN_EXAMPLES_AMP_DDP_AMP_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_AMP_DDP_AMP_DDP_LIB_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/examples/runner/example_options.h"

namespace tandem::train {

// The example's options (example_options.h): flags, defaults, rules, in
// the order of the entries its checkpoints record.
#define TANDEM_AMP_DDP_OPTIONS(X)                                         \
  X(std::string, amp, "bf16", OneOf("bf16", "f16", "off"), kAgreed,       \
    "Autocast dtype: bf16, f16 or off (f32, GradScaler disabled).")       \
  X(int64_t, steps, 10, Between(1, 1000000), kAgreed, "Training steps.")  \
  X(int64_t, batch_size, 20, Between(1, 65536), kAgreed,                  \
    "Per-rank batch size.")                                               \
  X(double, lr, 0.001, Any(), kAgreed, /* Sgd::CheckHyperParameters */    \
    "SGD learning rate.")                                                 \
  X(uint64_t, seed, 0, Any(), kAgreed, "Seed of the model and the data.") \
  X(std::string, comm_hook, "allreduce",                                  \
    OneOf("allreduce", "fp16_compress", "bf16_compress"), kAgreed,        \
    "DDP gradient hook: allreduce, fp16_compress or bf16_compress.")      \
  X(std::string, inject_inf, "", Any(), kAgreed, /* ParseInjectInfFlag */ \
    "RANK:STEP: put an inf into that rank's gradient at that step "       \
    "(from 0); every rank then skips the step and halves its scale.")     \
  TANDEM_VIRTUAL_WORLD_OPTION(X)
TANDEM_EXAMPLE_OPTIONS(AmpDdpOptions, TANDEM_AMP_DDP_OPTIONS);

struct InjectInf {
  int64_t rank = 0;
  int64_t step = 0;
};

using AmpDdpConfig = WithCheckpoint<AmpDdpOptions>;

// "RANK:STEP" (both >= 0) or "" (no injection); InvalidArgument otherwise.
absl::StatusOr<std::optional<InjectInf>> ParseInjectInfFlag(
    const std::string& value);

// Runs the snippet on `comm`'s rank (what every example's rank function
// does and its errors: runner/example_main.h); a malformed --inject_inf, or
// one naming a rank outside the world, is an error too.
absl::Status RunAmpDdp(comm::Communicator& comm, const AmpDdpConfig& config,
                       Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_AMP_DDP_AMP_DDP_LIB_H_
