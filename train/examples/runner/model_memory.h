// An example's check, before it builds its model, that the models every
// rank of this process will hold fit in the machine's memory: a model of
// ~0.8 TB (gpt_ddp --n_layer=64 --n_embd=16384) or 1000 simulated ranks of a
// ResNet would otherwise climb until the kernel kills the process, naming
// nothing.
//
//   TANDEM_RETURN_IF_ERROR(CheckModelsFitInMemory(
//       comm, "gpt_ddp", config.model.NumParameters(), 16,
//       "weights, gradients and AdamW's two moments"));
//
// Local (no collective): every rank computes the same answer. What it
// counts is a floor (parameters times the bytes each needs for its state,
// times the ranks of this process: every simulated rank lives in one
// process; a launched process holds one rank), not activations.
#ifndef TANDEM_TRAIN_EXAMPLES_RUNNER_MODEL_MEMORY_H_
#define TANDEM_TRAIN_EXAMPLES_RUNNER_MODEL_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace tandem::train {

// The ranks whose models live in this process: the world on sim, else 1.
int64_t RanksInThisProcess(const comm::Communicator& comm);

// OK when RanksInThisProcess(comm) x parameters x bytes_per_parameter fits
// in physical memory; else ResourceExhausted starting with `who`, naming
// the parameter count, the ranks, what the bytes hold (`state`), the bytes
// needed and the machine's, and what to do.
absl::Status CheckModelsFitInMemory(const comm::Communicator& comm,
                                    const std::string& who, int64_t parameters,
                                    int64_t bytes_per_parameter,
                                    const std::string& state);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RUNNER_MODEL_MEMORY_H_
