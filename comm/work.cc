#include "comm/work.h"

#include <time.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem::comm {
namespace {

class CompletedWork : public Work {
 public:
  CompletedWork(absl::Status status, WorkRecord record)
      : Work(std::move(record)), status_(std::move(status)) {
    const absl::Time now = RecordClockNow();
    if (mutable_record().start == absl::InfinitePast()) {
      mutable_record().start = now;
    }
    mutable_record().end = now;
  }
  bool IsCompleted() override { return true; }
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  const absl::Status status_;
};

}  // namespace

absl::Time RecordClockNow() {
  timespec ts{};
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return absl::Now();
  return absl::TimeFromTimespec(ts);
}

std::string WorkRecord::DebugString() const {
  const std::string when =
      completed() ? absl::FormatDuration(end - start)
                  : absl::StrCat("in flight for ",
                                 absl::FormatDuration(absl::Now() - start));
  return absl::StrCat(fp.DebugString(), ", ", bytes, " bytes, ", when);
}

WorkRecord StartRecord(const Fingerprint& fp, int world_size) {
  WorkRecord record;
  record.fp = fp;
  const int64_t one = fp.count * DTypeSize(fp.dtype);
  switch (fp.op) {
    case OpKind::kAllGather:      // fp.count is the send count
    case OpKind::kReduceScatter:  // fp.count is the recv count
      record.bytes = one * world_size;
      break;
    case OpKind::kBarrier:
      record.bytes = 0;
      break;
    case OpKind::kAllReduce:
    case OpKind::kBroadcast:
    case OpKind::kSend:
    case OpKind::kRecv:
      record.bytes = one;
      break;
  }
  record.start = RecordClockNow();
  return record;
}

std::unique_ptr<Work> MakeCompletedWork(absl::Status status,
                                        WorkRecord record) {
  return std::make_unique<CompletedWork>(std::move(status), std::move(record));
}

std::unique_ptr<Work> MakeRejectedWork(absl::Status status, Fingerprint fp,
                                       int world_size) {
  fp.seq = -1;
  return MakeCompletedWork(std::move(status), StartRecord(fp, world_size));
}

}  // namespace tandem::comm
