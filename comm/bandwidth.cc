#include "comm/bandwidth.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/types.h"

namespace tandem::comm {

double BusBandwidthFactor(OpKind op, int world_size) {
  const double n = world_size;
  if (world_size < 1) return 0;
  switch (op) {
    case OpKind::kAllReduce:
      return 2.0 * (n - 1) / n;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
      return (n - 1) / n;
    case OpKind::kBroadcast:
    case OpKind::kSend:
    case OpKind::kRecv:
      return 1.0;
    case OpKind::kBarrier:
      return 0.0;
  }
  return 0.0;
}

double AlgBandwidthGBps(int64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) / seconds / 1e9;
}

double BusBandwidthGBps(OpKind op, int world_size, int64_t bytes,
                        double seconds) {
  return AlgBandwidthGBps(bytes, seconds) * BusBandwidthFactor(op, world_size);
}

BandwidthTable::BandwidthTable(OpKind op, int world_size)
    : op_(op), world_size_(world_size) {}

std::string BandwidthTable::Header() const {
  return absl::StrFormat(
      "# %12s  %12s  %8s  %6s | %8s  %6s  %6s  %6s\n"
      "# %12s  %12s  %8s  %6s | %8s  %6s  %6s  %6s\n",
      "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong",
      "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "");
}

std::string BandwidthTable::Row(const BandwidthRow& row) const {
  const double us = row.seconds * 1e6;
  std::string time;
  if (us >= 10000.0) {
    time = absl::StrFormat("%8.0f", us);
  } else if (us >= 100.0) {
    time = absl::StrFormat("%8.1f", us);
  } else {
    time = absl::StrFormat("%8.2f", us);
  }
  const std::string wrong =
      row.wrong < 0 ? std::string("N/A") : absl::StrCat(row.wrong);
  return absl::StrFormat(
      "  %12d  %12d  %8s  %6s | %s  %6.2f  %6.2f  %6s\n", row.bytes, row.count,
      DTypeName(row.dtype),
      row.redop.has_value() ? ReduceOpName(*row.redop) : std::string("none"),
      time, AlgBandwidthGBps(row.bytes, row.seconds),
      BusBandwidthGBps(op_, world_size_, row.bytes, row.seconds), wrong);
}

}  // namespace tandem::comm
