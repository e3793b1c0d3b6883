#include "train/parallel/core/found_inf.h"

#include <cstdint>
#include <vector>

#include "base/status_macros.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

optim::FoundInfCombiner FoundInfAcrossRanks(comm::Communicator& comm,
                                            Device device,
                                            absl::Duration timeout) {
  return [&comm, device, timeout](bool found) -> absl::StatusOr<bool> {
    const int64_t mine = found ? 1 : 0;
    std::vector<int64_t> all(static_cast<size_t>(comm.size()));
    TANDEM_RETURN_IF_ERROR(
        AllGatherInt64(comm, device, {&mine, 1}, absl::MakeSpan(all), timeout));
    for (int64_t v : all) {
      if (v != 0) return true;
    }
    return false;
  };
}

}  // namespace tandem::train
