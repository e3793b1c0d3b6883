#include "train/examples/runner/model_memory.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/memory.h"

namespace tandem::train {

int64_t RanksInThisProcess(const comm::Communicator& comm) {
  return comm.backend() == "sim" ? comm.size() : 1;
}

absl::Status CheckModelsFitInMemory(const comm::Communicator& comm,
                                    const std::string& who, int64_t parameters,
                                    int64_t bytes_per_parameter,
                                    const std::string& state) {
  const int64_t ranks = RanksInThisProcess(comm);
  int64_t total = 0;
  if (__builtin_mul_overflow(parameters, ranks, &total)) {
    total = std::numeric_limits<int64_t>::max();
  }
  absl::Status fits = CheckFitsInMemory(
      total, bytes_per_parameter,
      absl::StrCat(who, ": ", ranks, " rank(s) in this process, each with ",
                   parameters, " parameters (", bytes_per_parameter,
                   " bytes each: ", state, ")"));
  if (fits.ok() || fits.code() != absl::StatusCode::kResourceExhausted) {
    return fits;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      fits.message(), "; nothing was built. Use a smaller model",
      ranks > 1 ? " or fewer simulated ranks (--world_size), or run the ranks "
                  "as processes (tandemrun, mpirun)"
                : "",
      ""));
}

}  // namespace tandem::train
