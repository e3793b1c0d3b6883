#include "comm/gloo/gloo_communicator.h"

#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "comm/fingerprint.h"
#include "comm/gloo/gloo_work.h"
#include "comm/reduce.h"
#include "comm/store/rendezvous.h"
#include "comm/validate.h"
#include "comm/work.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/types.h"

namespace tandem::comm {
namespace {

using gloo_internal::GlooWork;
using gloo_internal::OpState;
using gloo_internal::StallPolicy;
using gloo_internal::StoreAdapter;

// The tag of Create's one exchange (whether to check collectives), before
// any operation: distinct from every collective's and check's tag.
constexpr uint32_t kAgreeOnCheckTag = 0x7fffffffu;

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

}  // namespace

class GlooCommunicator::Impl {
 public:
  // Runs on the worker thread; gets the operation's state (Send/Recv hand it
  // to the waiter thread; the others return their status).
  using Task = std::function<absl::Status(std::shared_ptr<OpState>)>;

  Impl(int rank, int size, absl::Duration timeout, bool check,
       std::shared_ptr<gloo::rendezvous::Context> context,
       std::shared_ptr<const StallPolicy> stall)
      : rank_(rank),
        size_(size),
        timeout_(timeout),
        check_(check),
        context_(std::move(context)),
        stall_(std::move(stall)),
        send_seq_(static_cast<size_t>(size), 0),
        recv_seq_(static_cast<size_t>(size), 0) {
    worker_ = std::thread([this] { WorkerLoop(); });
    waiter_ = std::thread([this] { WaiterLoop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    tasks_cv_.notify_all();
    posted_cv_.notify_all();
    worker_.join();
    waiter_.join();
  }

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Queues `task` for operation `fp` (its seq assigned here).
  std::unique_ptr<Work> Enqueue(Fingerprint fp, Task task) {
    auto state = std::make_shared<OpState>();
    WorkRecord record = StartRecord(fp, size_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back({std::move(task), state, fp});
    }
    tasks_cv_.notify_one();
    return std::make_unique<GlooWork>(std::move(record), std::move(state),
                                      stall_);
  }

  int64_t NextCollective() { return collectives_++; }
  int64_t NextSend(int peer) { return send_seq_[static_cast<size_t>(peer)]++; }
  int64_t NextRecv(int peer) { return recv_seq_[static_cast<size_t>(peer)]++; }

  // Collective bodies, run on the worker thread.
  absl::Status AllReduceHost(void* data, int64_t count, DType dtype,
                             ReduceOp op, uint32_t tag) {
    if (count == 0) return absl::OkStatus();
    if (Is16BitFloat(dtype)) {
      std::vector<float> wide(static_cast<size_t>(count));
      Widen16BitFloats(dtype, data, wide.data(), count);
      absl::Status s = AllReduceHost(wide.data(), count, DType::kF32, op, tag);
      if (!s.ok()) return s;
      Narrow16BitFloats(dtype, wide.data(), data, count);
      return absl::OkStatus();
    }
    const ReduceOp combine = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    gloo::AllreduceOptions o(context_);
    const size_t n = static_cast<size_t>(count);
    switch (DTypeSize(dtype)) {
      case 1:
        o.setOutput(static_cast<uint8_t*>(data), n);
        break;
      case 2:
        o.setOutput(static_cast<uint16_t*>(data), n);
        break;
      case 4:
        o.setOutput(static_cast<uint32_t*>(data), n);
        break;
      default:
        o.setOutput(static_cast<uint64_t*>(data), n);
        break;
    }
    o.setReduceFunction(
        [dtype, combine](void* out, const void* a, const void* b, size_t k) {
          const void* srcs[] = {a, b};
          void* dsts[] = {out};
          // Arguments were validated at issue: this cannot fail.
          ReduceInto(dtype, combine, static_cast<int64_t>(k), srcs, dsts, 1)
              .IgnoreError();
        });
    o.setTag(tag);
    o.setTimeout(Millis(timeout_));
    gloo::allreduce(o);
    if (op == ReduceOp::kAvg) {
      const void* srcs[] = {data};
      void* dsts[] = {data};
      return ReduceInto(dtype, ReduceOp::kAvg, count, srcs, dsts, size_);
    }
    return absl::OkStatus();
  }

  absl::Status BroadcastHost(void* data, int64_t bytes, int root,
                             uint32_t tag) {
    if (bytes == 0) return absl::OkStatus();
    gloo::BroadcastOptions o(context_);
    o.setOutput(static_cast<uint8_t*>(data), static_cast<size_t>(bytes));
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(Millis(timeout_));
    gloo::broadcast(o);
    return absl::OkStatus();
  }

  absl::Status AllGatherHost(const void* send, int64_t bytes, void* recv,
                             uint32_t tag) {
    if (bytes == 0) return absl::OkStatus();
    // A copy of the input: in place, `send` is a slice of `recv`, which Gloo
    // does not allow.
    std::vector<uint8_t> in(static_cast<const uint8_t*>(send),
                            static_cast<const uint8_t*>(send) + bytes);
    gloo::AllgatherOptions o(context_);
    o.setInput(in.data(), in.size());
    o.setOutput(static_cast<uint8_t*>(recv),
                static_cast<size_t>(bytes) * static_cast<size_t>(size_));
    o.setTag(tag);
    o.setTimeout(Millis(timeout_));
    gloo::allgather(o);
    return absl::OkStatus();
  }

  // The collective check (GlooOptions::check_collectives): every rank's
  // fingerprint of collective `fp` gathered under a tag of its own, then
  // compared. Runs on the worker thread before the collective's data moves;
  // throws what Gloo throws.
  absl::Status CheckCollective(const Fingerprint& fp) {
    const EncodedFingerprint mine = Encode(fp);
    std::vector<int64_t> gathered(static_cast<size_t>(size_) *
                                  kFingerprintWords);
    gloo::AllgatherOptions o(context_);
    o.setInput(const_cast<int64_t*>(mine.data()), mine.size());
    o.setOutput(gathered.data(), gathered.size());
    o.setTag(kCheckTagBit | (static_cast<uint32_t>(fp.seq) & ~kCheckTagBit));
    o.setTimeout(Millis(timeout_));
    gloo::allgather(o);
    return CompareGatheredFingerprints("gloo", rank_, size_, gathered, mine);
  }

  absl::Status BarrierHost(uint32_t tag) {
    gloo::BarrierOptions o(context_);
    o.setTag(tag);
    o.setTimeout(Millis(timeout_));
    gloo::barrier(o);
    return absl::OkStatus();
  }

  // Posts a send or receive; the waiter thread completes `state`.
  void PostPointToPoint(bool send, void* data, int64_t bytes, int peer,
                        int64_t seq, std::shared_ptr<OpState> state) {
    std::unique_ptr<gloo::transport::UnboundBuffer> buf =
        context_->createUnboundBuffer(data, static_cast<size_t>(bytes));
    const uint64_t slot =
        gloo::Slot::build(kPointToPointSlotPrefix, static_cast<uint32_t>(seq));
    if (send) {
      buf->send(peer, slot);
    } else {
      buf->recv(peer, slot);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      posted_.push_back({std::move(buf), send, std::move(state)});
    }
    posted_cv_.notify_one();
  }

  // The status of a later operation once one has failed: an unshared copy,
  // since it goes to the waiting rank's thread (base/unshared_status.h).
  absl::Status Poisoned() {
    std::lock_guard<std::mutex> lock(mu_);
    return UnsharedStatus(first_error_);
  }

 private:
  static constexpr uint8_t kPointToPointSlotPrefix = 0x40;
  // Tags of the check's all-gathers; a collective's own tag is its number,
  // and the two never run at once (one worker thread).
  static constexpr uint32_t kCheckTagBit = 0x80000000u;

  struct Queued {
    Task task;
    std::shared_ptr<OpState> state;
    Fingerprint fp;
  };
  struct Posted {
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    bool send;
    std::shared_ptr<OpState> state;
  };

  void Fail(const Fingerprint& fp, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) {
      first_error_ = absl::AbortedError(absl::StrCat(
          "gloo rank ", rank_, ": not run because an earlier operation (",
          fp.DebugString(), ") failed: ", what));
    }
  }

  void WorkerLoop() {
    while (true) {
      Queued q;
      {
        std::unique_lock<std::mutex> lock(mu_);
        tasks_cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) {  // stop_ and drained
          worker_done_ = true;
          posted_cv_.notify_all();
          return;
        }
        q = std::move(tasks_.front());
        tasks_.pop_front();
      }
      if (absl::Status poisoned = Poisoned(); !poisoned.ok()) {
        q.state->Finish(std::move(poisoned));
        continue;
      }
      absl::Status status;
      try {
        if (check_ && q.fp.op != OpKind::kSend && q.fp.op != OpKind::kRecv) {
          status = CheckCollective(q.fp);
        }
        if (status.ok()) status = q.task(q.state);
      } catch (const std::exception& e) {
        status = absl::UnavailableError(absl::StrCat(
            "gloo rank ", rank_, ": ", q.fp.DebugString(),
            " failed: ", e.what(),
            " (a peer exited or the timeout passed; see the other ranks' "
            "errors)"));
        Fail(q.fp, e.what());
      }
      // Send/Recv tasks hand their state to the waiter instead.
      if (!status.ok() ||
          (q.fp.op != OpKind::kSend && q.fp.op != OpKind::kRecv)) {
        q.state->Finish(std::move(status));
      }
    }
  }

  void WaiterLoop() {
    while (true) {
      Posted p;
      {
        std::unique_lock<std::mutex> lock(mu_);
        posted_cv_.wait(lock,
                        [this] { return !posted_.empty() || worker_done_; });
        if (posted_.empty()) return;
        p = std::move(posted_.front());
        posted_.pop_front();
      }
      absl::Status status;
      try {
        const bool ok = p.send ? p.buf->waitSend(Millis(timeout_))
                               : p.buf->waitRecv(Millis(timeout_));
        if (!ok) status = absl::AbortedError("gloo: send/recv aborted");
      } catch (const std::exception& e) {
        status = absl::UnavailableError(absl::StrCat("gloo rank ", rank_, ": ",
                                                     p.send ? "Send" : "Recv",
                                                     " failed: ", e.what()));
      }
      p.state->Finish(std::move(status));
    }
  }

  const int rank_;
  const int size_;
  const absl::Duration timeout_;
  const bool check_;  // the collective check is on (the same on every rank)
  std::shared_ptr<gloo::rendezvous::Context> context_;
  const std::shared_ptr<const StallPolicy> stall_;  // every Work's notes
  // Issue-side counters: the rank's thread only.
  int64_t collectives_ = 0;
  std::vector<int64_t> send_seq_;
  std::vector<int64_t> recv_seq_;

  std::mutex mu_;
  // Separate wake-ups for the worker (tasks_) and the waiter (posted_):
  // one shared variable woke both on every operation.
  std::condition_variable tasks_cv_;
  std::condition_variable posted_cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The worker has run its last task: nothing more will be posted.
  bool worker_done_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Queued> tasks_ ABSL_GUARDED_BY(mu_);
  std::deque<Posted> posted_ ABSL_GUARDED_BY(mu_);
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
  std::thread waiter_;
};

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const GlooOptions& options) {
  if (absl::Status s = ValidateWorldSize(options.size); !s.ok()) return s;
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", options.rank, " is outside [0, ", options.size, ")"));
  }
  if (options.store == nullptr) {
    return absl::InvalidArgumentError("gloo: GlooOptions::store is null");
  }
  if (options.stall_note_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: GlooOptions::stall_note_interval must be zero (off) or "
        "positive; got ",
        absl::FormatDuration(options.stall_note_interval)));
  }
  TcpStoreClient& store = *options.store;
  // The network interface to listen on: the option, else PyTorch's
  // variable. Checked before arriving, so that a typo fails this rank at
  // once (and the others name it as missing) instead of after the mesh.
  std::string iface = options.iface;
  if (iface.empty() && options.hostname.empty()) {
    const char* env = std::getenv("GLOO_SOCKET_IFNAME");
    if (env != nullptr) iface = env;
  }
  if (!iface.empty() && if_nametoindex(iface.c_str()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo rank ", options.rank, ": network interface '", iface,
        "' (GlooOptions::iface or GLOO_SOCKET_IFNAME) does not exist on this "
        "host; `ip link` lists the interfaces"));
  }
  if (absl::Status s = ArriveAndWait(store, options.prefix, options.rank,
                                     options.size, options.stall_note_interval);
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("gloo: ", s.message()));
  }
  std::string hostname = options.hostname;
  if (!iface.empty()) {
    hostname = absl::StrCat("interface ", iface);
  } else if (hostname.empty()) {
    const std::string& address = store.address();
    if (address.rfind("127.", 0) == 0 || address.rfind("localhost:", 0) == 0) {
      hostname = "127.0.0.1";
    } else {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      hostname = host;
    }
  }
  try {
    gloo::transport::tcp::attr attr;
    if (iface.empty()) {
      attr.hostname = hostname;
    } else {
      attr.iface = iface;  // Gloo listens on that interface's address
    }
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(attr);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(Millis(options.timeout));
    StoreAdapter adapter(store);
    gloo::rendezvous::PrefixStore prefixed(
        absl::StrCat(options.prefix, "/mesh"), adapter);
    context->connectFullMesh(prefixed, device);
    // Ranks may disagree on the check (TANDEM_DISTRIBUTED_DEBUG set on some
    // only): it is on when any rank asks, so every rank issues the same
    // exchanges.
    int64_t mine = CollectiveCheckRequested(options.check_collectives) ? 1 : 0;
    std::vector<int64_t> all(static_cast<size_t>(options.size));
    gloo::AllgatherOptions agree(context);
    agree.setInput(&mine, 1);
    agree.setOutput(all.data(), all.size());
    agree.setTag(kAgreeOnCheckTag);
    agree.setTimeout(Millis(options.timeout));
    gloo::allgather(agree);
    const bool check = std::find(all.begin(), all.end(), 1) != all.end();
    // What Split's children start from: this rank's address resolved once,
    // and the agreed check (each child agrees again, with the same result).
    GlooOptions split_base = options;
    split_base.hostname = iface.empty() ? hostname : std::string();
    split_base.iface = iface;
    split_base.check_collectives = check;
    return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(
        std::make_unique<Impl>(options.rank, options.size, options.timeout,
                               check, std::move(context),
                               std::make_shared<const StallPolicy>(StallPolicy{
                                   .rank = options.rank,
                                   .size = options.size,
                                   .timeout = options.timeout,
                                   .interval = options.stall_note_interval,
                                   .store = options.store,
                                   .prefix = options.prefix})),
        std::move(split_base)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo rank ", options.rank, " of ", options.size,
                     ": connecting to the other ranks (listening on ", hostname,
                     ", store at ", store.address(), ") failed: ", e.what()));
  }
}

GlooCommunicator::GlooCommunicator(std::unique_ptr<Impl> impl,
                                   GlooOptions split_base)
    : impl_(std::move(impl)), split_base_(std::move(split_base)) {}
GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return impl_->rank(); }
int GlooCommunicator::size() const { return impl_->size(); }

namespace {

// Queues the posting of a Send or Recv; the waiter thread completes it.
std::unique_ptr<Work> PointToPoint(GlooCommunicator::Impl& impl,
                                   const Fingerprint& fp, BufferView buf,
                                   bool send) {
  GlooCommunicator::Impl* p = &impl;
  return impl.Enqueue(
      fp, [p, buf, send, fp](std::shared_ptr<OpState> state) -> absl::Status {
        p->PostPointToPoint(send, buf.data, buf.bytes(), fp.peer, fp.seq,
                            std::move(state));
        return absl::OkStatus();
      });
}

}  // namespace

std::unique_ptr<Work> GlooCommunicator::Post(const Operation& op) {
  Fingerprint fp = op.fp;
  const BufferView buf = op.buf;
  const BufferView recv = op.recv;
  Impl* impl = impl_.get();
  switch (fp.op) {
    case OpKind::kSend:
    case OpKind::kRecv: {
      const bool send = fp.op == OpKind::kSend;
      fp.seq = send ? impl_->NextSend(fp.peer) : impl_->NextRecv(fp.peer);
      if (buf.bytes() == 0)
        return MakeCompletedWork(absl::OkStatus(), StartRecord(fp, size()));
      return PointToPoint(*impl_, fp, buf, send);
    }
    default:
      break;
  }
  fp.seq = impl_->NextCollective();
  const auto tag = static_cast<uint32_t>(fp.seq);
  switch (fp.op) {
    case OpKind::kAllReduce: {
      const ReduceOp rop = *fp.reduce_op;
      return impl_->Enqueue(fp, [impl, buf, rop,
                                 tag](std::shared_ptr<OpState>) {
        return impl->AllReduceHost(buf.data, buf.count, buf.dtype, rop, tag);
      });
    }
    case OpKind::kBroadcast: {
      const int root = fp.root;
      return impl_->Enqueue(
          fp, [impl, buf, root, tag](std::shared_ptr<OpState>) {
            return impl->BroadcastHost(buf.data, buf.bytes(), root, tag);
          });
    }
    case OpKind::kAllGather:
      return impl_->Enqueue(
          fp, [impl, buf, recv, tag](std::shared_ptr<OpState>) {
            return impl->AllGatherHost(buf.data, buf.bytes(), recv.data, tag);
          });
    case OpKind::kReduceScatter: {
      const ReduceOp rop = *fp.reduce_op;
      const int r = rank();
      const BufferView send = buf;
      return impl_->Enqueue(
          fp,
          [impl, send, recv, rop, tag,
           r](std::shared_ptr<OpState>) -> absl::Status {
            // All-reduce a copy of the whole send buffer, keep this rank's
            // slice.
            std::vector<uint8_t> all(
                static_cast<const uint8_t*>(send.data),
                static_cast<const uint8_t*>(send.data) + send.bytes());
            absl::Status st = impl->AllReduceHost(all.data(), send.count,
                                                  send.dtype, rop, tag);
            if (!st.ok()) return st;
            if (recv.bytes() > 0) {
              std::memcpy(recv.data, all.data() + r * recv.bytes(),
                          static_cast<size_t>(recv.bytes()));
            }
            return absl::OkStatus();
          });
    }
    default:
      break;
  }
  return impl_->Enqueue(fp, [impl, tag](std::shared_ptr<OpState>) {
    return impl->BarrierHost(tag);
  });
}

}  // namespace tandem::comm
