#include "base/trace/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/fiber_local.h"
#include "base/json_quote.h"
#include "base/output_file.h"

namespace tandem::trace {
namespace internal {
std::atomic<bool> g_enabled{false};
}  // namespace internal

namespace {

// The Chrome pid of the host track (threads without a rank): far above any
// rank so that it sorts last.
constexpr int kHostPid = 1 << 30;
constexpr int kMainTid = 0;
constexpr int kCommTid = 1;
constexpr int kDeviceTid = 2;
constexpr char kHeader[] = "{\"traceEvents\":[\n";
constexpr char kFooter[] = "\n],\"displayTimeUnit\":\"ms\"}\n";

// One thread's events. Only its thread appends; Snapshot and Clear read or
// empty it from other threads, hence the (uncontended) mutex.
struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events ABSL_GUARDED_BY(mu);
};

// Every thread buffer ever created; they outlive their threads so that a
// rank's events survive the rank's thread.
struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry;
  return *registry;
}

std::atomic<int> g_next_thread_tid{kDeviceTid + 1};

thread_local int t_rank = -1;
thread_local int t_tid = -1;  // -1: not assigned yet
thread_local std::shared_ptr<ThreadBuffer> t_buffer;

// A rank's trace identity and buffer follow it when ranks are fibers
// (base/fiber_local.h): each fiber is a thread of the trace.
[[maybe_unused]] const bool kRankIsFiberLocal =
    base::RegisterFiberLocal<int>([]() -> int& { return t_rank; }, -1);
[[maybe_unused]] const bool kTidIsFiberLocal =
    base::RegisterFiberLocal<int>([]() -> int& { return t_tid; }, -1);
[[maybe_unused]] const bool kBufferIsFiberLocal =
    base::RegisterFiberLocal<std::shared_ptr<ThreadBuffer>>(
        []() -> std::shared_ptr<ThreadBuffer>& { return t_buffer; }, nullptr);

ThreadBuffer& MyBuffer() {
  if (t_buffer == nullptr) {
    t_buffer = std::make_shared<ThreadBuffer>();
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.buffers.push_back(t_buffer);
  }
  return *t_buffer;
}

int MyTid() {
  if (t_tid < 0) t_tid = g_next_thread_tid.fetch_add(1);
  return t_tid;
}

int Pid(int rank) { return rank < 0 ? kHostPid : rank; }

std::string TrackName(int tid) {
  if (tid == kMainTid) return "main";
  if (tid == kCommTid) return "comm";
  if (tid == kDeviceTid) return "device stream";
  return absl::StrCat("thread ", tid);
}

}  // namespace

void Start() { internal::g_enabled.store(true, std::memory_order_relaxed); }
void Stop() { internal::g_enabled.store(false, std::memory_order_relaxed); }

void Clear() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const std::shared_ptr<ThreadBuffer>& b : r.buffers) {
    std::lock_guard<std::mutex> buffer_lock(b->mu);
    b->events.clear();
  }
}

Args& Args::Add(std::string_view key, int64_t value) {
  absl::StrAppend(&out_, out_.empty() ? "" : ",", base::JsonQuote(key), ":",
                  value);
  return *this;
}

Args& Args::Add(std::string_view key, double value) {
  // JSON has no inf or nan: those become strings.
  if (std::isfinite(value)) {
    absl::StrAppendFormat(&out_, "%s%s:%.17g", out_.empty() ? "" : ",",
                          base::JsonQuote(key), value);
    return *this;
  }
  return Add(key, std::string_view(absl::StrCat(value)));
}

Args& Args::Add(std::string_view key, std::string_view value) {
  absl::StrAppend(&out_, out_.empty() ? "" : ",", base::JsonQuote(key), ":",
                  base::JsonQuote(value));
  return *this;
}

int ThreadRank() { return t_rank; }

ScopedThreadRank::ScopedThreadRank(int rank)
    : previous_rank_(t_rank), previous_tid_(t_tid) {
  t_rank = rank;
  t_tid = kMainTid;
}

ScopedThreadRank::~ScopedThreadRank() {
  t_rank = previous_rank_;
  t_tid = previous_tid_;
}

void Record(std::string_view name, std::string_view category, absl::Time start,
            absl::Time end, Track track, std::string args) {
  if (!Enabled()) return;
  Event e;
  e.name = std::string(name);
  e.category = std::string(category);
  e.rank = t_rank;
  e.tid = track == Track::kComm     ? kCommTid
          : track == Track::kDevice ? kDeviceTid
                                    : MyTid();
  e.start_us = absl::ToUnixMicros(start);
  e.duration_us = std::max<int64_t>(0, absl::ToInt64Microseconds(end - start));
  e.args = std::move(args);
  ThreadBuffer& buffer = MyBuffer();
  std::lock_guard<std::mutex> lock(buffer.mu);
  buffer.events.push_back(std::move(e));
}

struct Scope::Active {
  std::string name;
  std::string category;
  std::string args;
  absl::Time start;
};

void Scope::Begin(std::string_view name, std::string_view category) {
  active_ = new Active;
  active_->name = std::string(name);
  active_->category = std::string(category);
  active_->start = absl::Now();
}

void Scope::End() {
  Record(active_->name, active_->category, active_->start, absl::Now(),
         Track::kThread, std::move(active_->args));
  delete active_;
  active_ = nullptr;
}

void Scope::set_args(std::string args) {
  if (active_ != nullptr) active_->args = std::move(args);
}

std::vector<Event> Snapshot() {
  std::vector<Event> all;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const std::shared_ptr<ThreadBuffer>& b : r.buffers) {
      std::lock_guard<std::mutex> buffer_lock(b->mu);
      all.insert(all.end(), b->events.begin(), b->events.end());
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    // An enclosing event (same start, longer) before the ones it holds.
    return std::make_tuple(Pid(a.rank), a.tid, a.start_us, -a.duration_us) <
           std::make_tuple(Pid(b.rank), b.tid, b.start_us, -b.duration_us);
  });
  return all;
}

std::string ToChromeJson(const std::vector<Event>& events) {
  std::vector<std::string> lines;
  std::set<int> pids;
  std::set<std::pair<int, int>> tracks;
  for (const Event& e : events) {
    pids.insert(Pid(e.rank));
    tracks.insert({Pid(e.rank), e.tid});
  }
  for (const int pid : pids) {
    const std::string name =
        pid == kHostPid ? "host" : absl::StrCat("rank ", pid);
    lines.push_back(absl::StrCat(
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
        ",\"tid\":0,\"args\":{\"name\":", base::JsonQuote(name), "}}"));
    lines.push_back(absl::StrCat(
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid,
        ",\"tid\":0,\"args\":{\"sort_index\":", pid, "}}"));
  }
  for (const auto& [pid, tid] : tracks) {
    lines.push_back(absl::StrCat(
        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid, ",\"tid\":",
        tid, ",\"args\":{\"name\":", base::JsonQuote(TrackName(tid)), "}}"));
  }
  for (const Event& e : events) {
    lines.push_back(absl::StrCat("{\"name\":", base::JsonQuote(e.name),
                                 ",\"cat\":", base::JsonQuote(e.category),
                                 ",\"ph\":\"X\",\"pid\":", Pid(e.rank),
                                 ",\"tid\":", e.tid, ",\"ts\":", e.start_us,
                                 ",\"dur\":", e.duration_us, ",\"args\":{",
                                 e.args, "}}"));
  }
  std::string out = kHeader;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += ",\n";
    out += lines[i];
  }
  out += kFooter;
  return out;
}

namespace {

// Through base/output_file.h: a regular file is replaced atomically, a
// device or FIFO (--trace=/dev/null) written in place, a link followed.
absl::Status WriteFile(const std::string& path, const std::string& contents) {
  return base::WriteOutputFile(path, contents, "trace");
}

}  // namespace

absl::Status WriteChromeTrace(const std::string& path) {
  return WriteFile(path, ToChromeJson(Snapshot()));
}

absl::Status MergeChromeTraces(const std::vector<std::string>& inputs,
                               const std::string& output) {
  std::string body;
  for (const std::string& input : inputs) {
    std::ifstream f(input, std::ios::binary);
    if (!f) {
      return absl::NotFoundError(
          absl::StrCat("trace merge: cannot read ", input));
    }
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    const std::string_view header = kHeader;
    const std::string_view footer = kFooter;
    if (text.size() < header.size() + footer.size() ||
        text.compare(0, header.size(), header) != 0 ||
        text.compare(text.size() - footer.size(), footer.size(), footer) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trace merge: ", input,
          " is not a trace written by tandem (expected it to start with ",
          "{\"traceEvents\":[ and end with ],\"displayTimeUnit\":\"ms\"}); "
          "pass the files --trace wrote"));
    }
    const std::string events =
        text.substr(header.size(), text.size() - header.size() - footer.size());
    if (events.empty()) continue;
    if (!body.empty()) body += ",\n";
    body += events;
  }
  return WriteFile(output, absl::StrCat(kHeader, body, kFooter));
}

}  // namespace tandem::trace
