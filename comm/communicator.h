// Communicator: the contract every backend (sim, mpi, nccl) implements.
//
// One Communicator per rank. Every operation is issued asynchronously and
// returns a Work (comm/work.h); errors come back through Work::Wait() only.
//
//   absl::Status Step(comm::Communicator& comm, std::vector<float>& grads) {
//     auto work = comm.AllReduce(comm::HostView(absl::MakeSpan(grads)),
//                                comm::ReduceOp::kAvg);
//     return work->Wait();
//   }
//
// Ordering contract (as NCCL and MPI):
//   * Every rank issues the same collectives (AllReduce, Broadcast,
//     AllGather, ReduceScatter, Barrier) in the same order, with matching
//     arguments: dtype, count, root and reduce op. A backend may check this
//     (sim and mpi do, and fail every rank with both fingerprints on a
//     mismatch; comm/fingerprint.h).
//   * Send/Recv pairs match in issue order per (sender, receiver) pair, with
//     equal dtype and count. They are not ordered against collectives.
//   * Several operations may be outstanding at once, and their Works may be
//     waited in any order. A Work completes only after every participant has
//     issued the operation.
//   * An argument error (null or short buffer, root or peer out of range...)
//     returns an already-failed Work and does not count as an issued
//     operation; the communicator stays usable.
//
// Buffers: every buffer passed in stays valid and untouched by the caller
// until the operation's Work completes (or fails). Input buffers are only
// read. Backends say which memory spaces they accept (sim and mpi: host).
//
// Thread-safety: a Communicator belongs to its rank; call it from one thread
// at a time.
//
// Sub-communicators (Split; MPI_Comm_split, ncclCommSplit, c10d new_group):
//   * Split is a collective of this communicator: every rank calls it, in
//     the same order relative to this communicator's other collectives.
//   * Ranks that pass the same color (>= 0) get one new communicator over
//     just them, its ranks ordered by key (ties by rank here); a rank that
//     passes kNoColor takes part and gets nullptr.
//   * The new communicator is independent: its operations and sequence
//     numbers never match this one's (an AllReduce on one does not pair
//     with an AllReduce on the other), and the ordering contract above
//     holds within each communicator separately. A rank may interleave
//     operations of several communicators, as long as every rank's order
//     cannot deadlock (as in NCCL: a rank blocked in one waits for peers
//     that may be blocked in the other).
//   * Lifetime: the result belongs to its rank like this one; destroy it
//     before this communicator (and, in the simulated cluster, before the
//     rank's function returns). Its failures stay its own unless the engine
//     says otherwise (sim: a failure on either aborts both, like a crash).
//   * Every engine splits (sim, mpi, gloo, nccl); a Communicator that
//     cannot (a test double, a wrapper) returns Unimplemented naming the
//     engine, on every rank alike (the default below), never a hang.
//   * comm/split_plan.h is the one membership rule the engines share.
#ifndef TANDEM_COMM_COMMUNICATOR_H_
#define TANDEM_COMM_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "comm/line_sink.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

// Where a rank's buffers live: host memory (ordinal -1) or CUDA device
// `ordinal` (among the devices this process sees). Comm's own words for it:
// train/launch maps it to a tensor Device.
struct CommDevice {
  MemorySpace space = MemorySpace::kHost;
  int ordinal = -1;

  static CommDevice Host() { return {}; }
  static CommDevice Cuda(int ordinal) { return {MemorySpace::kCuda, ordinal}; }
  bool operator==(const CommDevice&) const = default;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "sim", "mpi", "nccl".
  virtual std::string_view backend() const = 0;
  // Where this rank works: the memory its model and batches should live in
  // (sim and mpi: the host, the default; nccl: the rank's GPU).
  virtual CommDevice device() const { return CommDevice::Host(); }

  // Whether AllReduce and ReduceScatter take ReduceOp::kTreeSum: an engine
  // that reduces every rank's buffer in one place and sums them in the
  // canonical tree order over ranks (sim). comm::OrderedAllReduce uses it
  // where it is offered and builds the same bits from Send/Recv elsewhere.
  // Engines without it reject kTreeSum (Unimplemented, every rank alike).
  virtual bool native_tree_sum() const { return false; }

  // In place: every rank's `buf` ends up holding the elementwise reduction of
  // all ranks' `buf`. Avg on an integer dtype is an argument error.
  [[nodiscard]] virtual std::unique_ptr<Work> AllReduce(BufferView buf,
                                                        ReduceOp op) = 0;

  // Every rank's `buf` ends up holding `root`'s `buf`.
  [[nodiscard]] virtual std::unique_ptr<Work> Broadcast(BufferView buf,
                                                        int root) = 0;

  // recv (size() * send.count elements) ends up holding every rank's `send`
  // in rank order: rank r's at [r * send.count, (r + 1) * send.count).
  // In place is allowed when send is exactly that slice of recv.
  [[nodiscard]] virtual std::unique_ptr<Work> AllGather(BufferView send,
                                                        BufferView recv) = 0;

  // send has size() * recv.count elements; rank r's recv ends up holding the
  // reduction over all ranks of send[r * recv.count, (r + 1) * recv.count).
  // In place is allowed when recv is exactly that slice of send.
  [[nodiscard]] virtual std::unique_ptr<Work> ReduceScatter(BufferView send,
                                                            BufferView recv,
                                                            ReduceOp op) = 0;

  // Point to point. `peer` is the other rank (not this one); the matching
  // Recv/Send on the peer has the same dtype and count.
  [[nodiscard]] virtual std::unique_ptr<Work> Send(BufferView buf,
                                                   int peer) = 0;
  [[nodiscard]] virtual std::unique_ptr<Work> Recv(BufferView buf,
                                                   int peer) = 0;

  // Blocks until every rank has called Barrier (a collective; it counts in
  // the collective order). Returns what the underlying Work returns.
  virtual absl::Status Barrier() = 0;

  // A rank passing this color to Split takes part but gets no communicator.
  static constexpr int kNoColor = -1;

  // A sub-communicator over the ranks that pass the same `color`, ranked by
  // `key` (see "Sub-communicators" above). Blocks until every rank has
  // called it (bounded by the engine's timeout). Errors: color < -1 (an
  // argument error, this rank only), the engine's errors, Unimplemented
  // where the engine has no split.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                              int key) {
    (void)color;
    (void)key;
    return absl::UnimplementedError(absl::StrCat(
        "Communicator::Split is not implemented by the '",
        std::string(backend()),
        "' engine; sim, mpi, gloo and nccl have sub-communicators"));
  }

  // Where this rank's printed lines go (see comm/rank_printer.h): stdout for
  // real backends, a per-rank capture in the simulated cluster when asked.
  // The sink outlives the Communicator's use by its rank.
  virtual LineSink& output() const { return StdoutLineSink(); }
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_COMMUNICATOR_H_
