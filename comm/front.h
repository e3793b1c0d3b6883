// EngineFront: the one front every engine's Communicator sits behind. It does
// once what each engine used to repeat at the start of every operation:
//   1. the operation's fingerprint (comm/fingerprint.h: op, dtype, count,
//      root, reduce op, peer; the engine numbers it),
//   2. the argument checks every engine shares (comm/validate.h), then the
//      memory space the engine moves (memory_space()), then the engine's own
//      further checks (CheckOperation: MPI's int counts, NCCL's device),
//   3. the rejection: an operation that fails a check returns an
//      already-failed Work whose record has seq -1 (MakeRejectedWork) and
//      reaches no engine,
//   4. Barrier as a posted barrier operation, waited.
// An engine implements the thin rest: Post (number the operation, record
// it, move the data), Split, backend() (its name), and its own checks.
//
//   class MyEngine final : public comm::EngineFront {
//     std::unique_ptr<Work> Post(const Operation& op) override {...}
//     ...
//   };
//
// Cheap by construction: an Operation is a plain value on the caller's
// stack (no allocation, no lock); the front adds one virtual call per
// operation (the simulated cluster's 8192-rank path counts on this).
//
// Thread-safety: as Communicator (one thread of the rank at a time).
#ifndef TANDEM_COMM_FRONT_H_
#define TANDEM_COMM_FRONT_H_

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

class EngineFront : public Communicator {
 public:
  // One checked operation as the front hands it to the engine.
  struct Operation {
    // op, dtype, count, root, reduce op, peer; seq is left at its default
    // (the engine numbers it: collectives in issue order, Send/Recv per
    // peer).
    Fingerprint fp;
    // The buffer of AllReduce, Broadcast, Send and Recv; the send buffer of
    // AllGather and ReduceScatter; empty for Barrier.
    BufferView buf;
    // The recv buffer of AllGather and ReduceScatter; empty otherwise.
    BufferView recv;
  };

  [[nodiscard]] std::unique_ptr<Work> AllReduce(BufferView buf,
                                                ReduceOp op) final;
  [[nodiscard]] std::unique_ptr<Work> Broadcast(BufferView buf, int root) final;
  [[nodiscard]] std::unique_ptr<Work> AllGather(BufferView send,
                                                BufferView recv) final;
  [[nodiscard]] std::unique_ptr<Work> ReduceScatter(BufferView send,
                                                    BufferView recv,
                                                    ReduceOp op) final;
  [[nodiscard]] std::unique_ptr<Work> Send(BufferView buf, int peer) final;
  [[nodiscard]] std::unique_ptr<Work> Recv(BufferView buf, int peer) final;
  // Posts a barrier operation (dtype f32, count 0) and waits for it without
  // a Wait timeout (the engine's own operation timeout bounds it).
  absl::Status Barrier() final;

 protected:
  // The one memory space this engine moves (sim, mpi, gloo: the host;
  // nccl: CUDA). Buffers elsewhere are rejected naming engine_name().
  virtual MemorySpace memory_space() const { return MemorySpace::kHost; }
  // The engine as the front's errors name it: backend() unless a wrapper
  // moves another memory space than its backend's ("nccl (host staging)").
  virtual std::string_view engine_name() const { return backend(); }
  // The engine's checks after the shared ones (default: none). An error
  // rejects the operation like the shared checks do.
  virtual absl::Status CheckOperation(const Operation& op) {
    (void)op;
    return absl::OkStatus();
  }
  // Issues a checked operation and returns its Work at once (errors only
  // through Wait). Owns the rest: numbering, the Work record, the failure
  // state of the engine.
  virtual std::unique_ptr<Work> Post(const Operation& op) = 0;

 private:
  // The shared checks of `op` in the order every engine made them, then
  // Post (or the rejected Work).
  std::unique_ptr<Work> Issue(const Operation& op, absl::Status valid);
};

// An engine whose every operation is a function of its own (NCCL, MPI, the
// host-staging wrapper over NCCL) derives from this instead of writing the
// switch over OpKind in its Post: the front's checks, then the matching
// Post* below. Engines that share work between operations (sim's slots,
// gloo's numbering) implement Post themselves.
class PerOperationFront : public EngineFront {
 protected:
  // Each gets the operation the front checked (its fingerprint unnumbered,
  // as Post would) and owns the rest, as Post does.
  virtual std::unique_ptr<Work> PostAllReduce(BufferView buf, ReduceOp op) = 0;
  virtual std::unique_ptr<Work> PostBroadcast(BufferView buf, int root) = 0;
  virtual std::unique_ptr<Work> PostAllGather(BufferView send,
                                              BufferView recv) = 0;
  virtual std::unique_ptr<Work> PostReduceScatter(BufferView send,
                                                  BufferView recv,
                                                  ReduceOp op) = 0;
  virtual std::unique_ptr<Work> PostSend(BufferView buf, int peer) = 0;
  virtual std::unique_ptr<Work> PostRecv(BufferView buf, int peer) = 0;
  virtual std::unique_ptr<Work> PostBarrier() = 0;

 private:
  // The one switch: `op` to the Post* of its kind.
  std::unique_ptr<Work> Post(const Operation& op) final;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_FRONT_H_
