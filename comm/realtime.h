// TimeFromRealtime: a CLOCK_REALTIME reading as an absl::Time, inline.
// comm::RecordClockNow's vDSO way (comm/work.cc) reads the clock twice per
// operation and rank; absl::TimeFromTimespec's out-of-line normalisation
// cost ~40 instructions a read there.
#ifndef TANDEM_COMM_REALTIME_H_
#define TANDEM_COMM_REALTIME_H_

#include <cstdint>
#include <ctime>

#include "absl/time/time.h"

namespace tandem::comm {

// The instant of `ts` as the kernel gives it (tv_nsec in [0, 1e9)): the same
// as absl::TimeFromTimespec(ts), to the nanosecond, until the year 2262
// (int64 nanoseconds).
inline absl::Time TimeFromRealtime(const timespec& ts) {
  return absl::FromUnixNanos(static_cast<int64_t>(ts.tv_sec) * 1000000000 +
                             ts.tv_nsec);
}

}  // namespace tandem::comm

#endif  // TANDEM_COMM_REALTIME_H_
