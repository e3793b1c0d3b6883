// The timeline: a process-wide recorder of Chrome-trace events ("complete"
// events with a start and a duration) with one track per rank, written as
// Chrome trace / Perfetto JSON (chrome://tracing, https://ui.perfetto.dev).
//
//   trace::Start();                        // off by default
//   {
//     trace::ScopedThreadRank rank(3);     // this thread runs rank 3
//     trace::Scope s("forward", "model");  // one event, from here to '}'
//     ...
//   }
//   trace::Stop();
//   TANDEM_RETURN_IF_ERROR(trace::WriteChromeTrace("run.json"));
//
// Tracks: each rank is a Chrome "process" (pid = rank, named "rank N"); the
// thread that set ScopedThreadRank is its "main" track (tid 0), an operation
// recorded with Track::kComm (a collective, from launch to completion, which
// overlaps the main track's work) goes on its "comm" track (tid 1), what its
// device's communication stream ran (Track::kDevice, where there is a
// device) on its "device stream" track (tid 2), and any other thread of the
// rank gets a track of its own. Events from a thread
// without a rank go to the process-wide "host" track (pid -1).
//
// Cost: off, every emit point is one relaxed atomic load and a branch
// (Enabled()); on, an event is a clock read at each end and one append to
// the calling thread's own buffer (an uncontended mutex), so ranks never
// contend with each other.
//
// Thread safety: every function may be called from any thread at any time.
// Events recorded while a Snapshot() or WriteChromeTrace() runs are either in
// it or not; none is lost or torn.
#ifndef TANDEM_BASE_TRACE_TRACE_H_
#define TANDEM_BASE_TRACE_TRACE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::trace {

namespace internal {
extern std::atomic<bool> g_enabled;
}  // namespace internal

// True while recording. One relaxed atomic load: emit points test it first
// and build nothing (no string, no clock read) when it is false.
inline bool Enabled() {
  return internal::g_enabled.load(std::memory_order_relaxed);
}

// Starts recording (events recorded before stay, see Clear()).
void Start();
// Stops recording; what was recorded stays until Clear().
void Stop();
// Drops every recorded event (threads' buffers stay registered).
void Clear();

// Which track of its rank an event goes on.
enum class Track {
  kThread,  // the calling thread's own track (its rank's "main" if it set
            // ScopedThreadRank)
  kComm,    // the rank's "comm" track: collectives from launch to completion
  kDevice,  // the rank's "device stream" track: when its device's
            // communication stream ran each collective (nccl)
};

struct Event {
  std::string name;
  std::string category;  // "model", "ddp", "comm", "optim", "data", ...
  int rank = -1;         // Chrome pid; -1: the host track
  int tid = 0;           // 0 main, 1 comm, >= 2 other threads
  int64_t start_us = 0;  // microseconds since the Unix epoch
  int64_t duration_us = 0;
  // Extra key/values shown when the event is selected, as a JSON object's
  // members without the braces ("\"bytes\":4096,\"op\":\"sum\""); empty for
  // none. Build it with Args.
  std::string args;
};

// Builds Event::args. Keys and string values are JSON-escaped.
class Args {
 public:
  Args& Add(std::string_view key, int64_t value);
  Args& Add(std::string_view key, double value);
  Args& Add(std::string_view key, std::string_view value);
  Args& Add(std::string_view key, const char* value) {
    return Add(key, std::string_view(value));
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// The rank the calling thread runs, for the events it records (-1 if none).
int ThreadRank();

// Sets the calling thread's rank for its lifetime (restores the previous
// value on destruction). Runners set it on each rank's thread before the
// rank's code runs.
class ScopedThreadRank {
 public:
  explicit ScopedThreadRank(int rank);
  ~ScopedThreadRank();
  ScopedThreadRank(const ScopedThreadRank&) = delete;
  ScopedThreadRank& operator=(const ScopedThreadRank&) = delete;

 private:
  int previous_rank_;
  int previous_tid_;
};

// Records one complete event on the calling thread's rank (if recording).
void Record(std::string_view name, std::string_view category, absl::Time start,
            absl::Time end, Track track = Track::kThread,
            std::string args = {});

// One event from construction to destruction on the calling thread. Off,
// the Scope is one null pointer: construction is Enabled() and a branch,
// destruction a null check. On, `name` and `category` are copied (they need
// not outlive the Scope) into a small block allocated for the event.
class Scope {
 public:
  Scope(std::string_view name, std::string_view category) {
    if (Enabled()) Begin(name, category);
  }
  ~Scope() {
    if (active_ != nullptr) End();
  }
  // Key/values shown with the event (ignored when not recording).
  void set_args(std::string args);
  bool recording() const { return active_ != nullptr; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  struct Active;
  void Begin(std::string_view name, std::string_view category);
  void End();

  Active* active_ = nullptr;  // owned; non-null while recording
};

// Every recorded event, sorted by (rank, tid, start, longest first).
std::vector<Event> Snapshot();

// The Chrome trace JSON of `events`: {"traceEvents":[...]} with one event
// per line, plus metadata naming each rank ("rank N") and track ("main",
// "comm", "thread K"), and "displayTimeUnit":"ms".
std::string ToChromeJson(const std::vector<Event>& events);

// Writes ToChromeJson(Snapshot()) to `path` (through a temporary file
// renamed into place). An error names the path and the reason.
absl::Status WriteChromeTrace(const std::string& path);

// Concatenates traces written by WriteChromeTrace (e.g. one per MPI process)
// into one, read from `inputs`, written to `output`. InvalidArgument naming
// the file that is not such a trace; NotFound for a missing input.
absl::Status MergeChromeTraces(const std::vector<std::string>& inputs,
                               const std::string& output);

}  // namespace tandem::trace

#endif  // TANDEM_BASE_TRACE_TRACE_H_
