// How much memory this machine has, and the check every tool makes before an
// allocation whose size comes from a flag or a file: refuse, with the
// figures, what could never fit, instead of dying in std::bad_alloc, the OOM
// killer or an hours-long swap storm.
//
//   TANDEM_RETURN_IF_ERROR(CheckFitsInMemory(n, sizeof(int64_t), "--size"));
#ifndef TANDEM_BASE_MEMORY_H_
#define TANDEM_BASE_MEMORY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tandem {

// Physical memory of this machine in bytes (sysconf(_SC_PHYS_PAGES) times the
// page size), or 0 when the system does not say. Thread-safe.
int64_t PhysicalMemoryBytes();

// OK when count * element_bytes (both >= 0) fits in the machine's physical
// memory; otherwise ResourceExhausted naming `what`, the bytes needed (or
// that the product overflows) and the machine's figure. Negative inputs are
// InvalidArgument. When the machine's memory is unknown only the overflow is
// checked.
absl::Status CheckFitsInMemory(int64_t count, int64_t element_bytes,
                               absl::string_view what);

}  // namespace tandem

#endif  // TANDEM_BASE_MEMORY_H_
