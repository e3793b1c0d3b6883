#include "base/memory.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem {
namespace {

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (1 << 30));
}

}  // namespace

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(pages),
                             static_cast<int64_t>(page_size), &bytes)) {
    return INT64_MAX;
  }
  return bytes;
}

absl::Status CheckFitsInMemory(int64_t count, int64_t element_bytes,
                               absl::string_view what) {
  if (count < 0 || element_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a negative size (", count, " x ", element_bytes,
                     " bytes) cannot be allocated"));
  }
  const int64_t machine = PhysicalMemoryBytes();
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, element_bytes, &bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": ", count, " x ", element_bytes,
        " bytes overflows a 64-bit size; this machine has ",
        machine > 0 ? GiB(machine) : std::string("an unknown amount"),
        " of physical memory: use a smaller value"));
  }
  if (machine > 0 && bytes > machine) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " needs ", bytes, " bytes (", GiB(bytes),
                     "), more than this machine's ", GiB(machine),
                     " of physical memory: use a smaller value"));
  }
  return absl::OkStatus();
}

}  // namespace tandem
