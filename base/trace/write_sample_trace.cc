// Writes a small trace of two ranks (nested scopes, a comm event, awkward
// names) to argv[1], and a merge of it with itself to argv[2], for
// trace_json_test.sh.
#include <cstdio>
#include <thread>

#include "absl/time/clock.h"
#include "base/trace/trace.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_sample_trace OUT.json MERGED.json\n");
    return 2;
  }
  namespace trace = tandem::trace;
  trace::Start();
  auto rank = [](int r) {
    trace::ScopedThreadRank scoped(r);
    trace::Scope step("step \"quoted\" \\ \n", "train");
    { trace::Scope forward("forward", "model"); }
    const absl::Time launch = absl::Now();
    trace::Record(
        "AllReduce", "comm", launch, absl::Now(), trace::Track::kComm,
        trace::Args().Add("bytes", int64_t{4096}).Add("op", "sum").str());
  };
  std::thread a(rank, 0), b(rank, 1);
  a.join();
  b.join();
  trace::Stop();
  if (!trace::WriteChromeTrace(argv[1]).ok()) return 1;
  if (!trace::MergeChromeTraces({argv[1], argv[1]}, argv[2]).ok()) return 1;
  return 0;
}
