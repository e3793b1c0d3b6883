// MpiCommunicator: the Communicator contract over OpenMPI, for real
// multi-process (and multi-node) jobs on CPUs. One process is one rank.
//
//   // mpirun -np 4 bazel-bin/train/examples/toy_ddp --backend=mpi
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::MpiCommunicator> comm,
//                           comm::MpiCommunicator::Create());
//   std::vector<float> grads = ...;
//   auto work = comm->AllReduce(comm::HostView(absl::MakeSpan(grads)),
//                               comm::ReduceOp::kAvg);
//   TANDEM_RETURN_IF_ERROR(work->Wait());
//
// How it moves data: every operation is an MPI nonblocking call
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ireduce_scatter_block,
// MPI_Isend/MPI_Irecv, MPI_Ibarrier) on a private duplicate of
// MPI_COMM_WORLD. There is no progress thread: OpenMPI advances nonblocking
// collectives inside MPI calls, so progress happens when the rank calls
// Work::IsCompleted() (one MPI_Test) or Work::Wait() (MPI_Test in a loop that
// yields for up to 20 ms — OpenMPI's own MPI_Wait polls without pause, and
// libnbc advances only inside those polls — then naps 50 µs between polls,
// so a rank stuck on a slow peer leaves its core to others). Overlap of
// communication with computation is therefore only as good as how often the
// caller polls; DDP polls its in-flight buckets from its gradient hooks. We
// chose this over a progress thread because it needs only
// MPI_THREAD_SERIALIZED, adds no thread per rank competing with compute for the
// cores, and keeps small-message latency at OpenMPI's own.
//
// Semantics beyond plain MPI, so results match the sim backend:
//   * kAvg is MPI_SUM followed by a division by the world size.
//   * f16/bf16 reductions are converted to f32, reduced in f32 and rounded
//     once (a temporary f32 buffer of the same count); moves of f16/bf16
//     (Broadcast, AllGather, Send/Recv) are raw 16-bit copies.
//   * In-place AllGather and ReduceScatter (the send slice inside recv, or
//     the reverse) are supported.
//   * Checked, as in sim (MpiOptions::check_collectives): before its data
//     moves, every collective exchanges its fingerprint (op, sequence number,
//     dtype, count, root, reduce op) with every rank; on a mismatch the
//     operation fails on every rank with kFailedPrecondition naming each
//     fingerprint and the ranks that issued it, and no data reaches MPI
//     (where a mismatch is undefined behaviour: truncation errors, crashes
//     or hangs). See comm/mpi/internal/mpi_work.h. Send/Recv are not checked.
//
// Timeouts: an operation not complete within `options.timeout` of being
// issued fails with kDeadlineExceeded naming the operation, its sequence
// number, how long it waited and how far it got (with the check on: whether
// every rank has issued it; MPI cannot tell which ranks are missing). While a
// Work waits, rank 0 prints "rank 0: still waiting for AllReduce #12 (...)
// for 30s; ...; timeout in 4m30s" to stderr every
// `options.stall_note_interval`. MPI cannot cancel a collective, so the
// buffers stay in MPI's hands after a timeout: the caller should end the job
// (MpiAbort) rather than reuse them, and must not free them before
// MPI_Finalize (late ranks' data may still arrive in them during any MPI
// call, MPI_Finalize's progress included). The communicator's own buffers of
// such an operation (its fingerprint exchange, the f32 copy of an f16/bf16
// reduction) are kept until the process ends for the same reason
// (mpi_internal::KeepForMpi), also when the communicator is destroyed.
//
// Work records (comm/work.h): collectives are numbered in issue order from 0
// (Barrier included), Send/Recv per peer; `end` is when this rank saw the
// operation complete.
//
// Lifetime: Works must not outlive their communicator.
//
// Thread-safety: one MpiCommunicator per process; call it (and its Works)
// from one thread at a time. MPI must provide MPI_THREAD_SERIALIZED (checked
// at Create with a clear error).
#ifndef TANDEM_COMM_MPI_MPI_COMMUNICATOR_H_
#define TANDEM_COMM_MPI_MPI_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/front.h"

namespace tandem::comm {

struct MpiOptions {
  // Per-operation limit, from issue to completion.
  absl::Duration timeout = absl::Minutes(5);
  // OpenMPI only: make its nonblocking all-reduce (libnbc) use the ring
  // algorithm, through the MPI_T control variable
  // coll_libnbc_iallreduce_algorithm. libnbc's own choice for fewer than 4
  // ranks is a binomial tree that, at 2 ranks, took 2x MPI_Allreduce's time
  // from 1 MiB up (bench/PERFORMANCE.md); ring matches MPI_Allreduce there.
  // Skipped when the user set OMPI_MCA_coll_libnbc_iallreduce_algorithm
  // (their choice wins) and on MPIs without that variable. The variable is
  // process-wide: it affects the application's own MPI_Iallreduce calls too.
  bool ring_iallreduce = true;
  // The collective mismatch check (see above). The environment variable
  // TANDEM_DISTRIBUTED_DEBUG overrides it, in the spirit of PyTorch's
  // TORCH_DISTRIBUTED_DEBUG: DETAIL turns it on, OFF turns it off; unset or
  // any other value leaves this. The check is on for every rank when it is
  // on for any (Create agrees on it). Costs one small all-gather per
  // collective (bench/PERFORMANCE.md).
  bool check_collectives = true;
  // While an operation is waited on, rank 0 prints a "still waiting for ..."
  // line to stderr this often, so a stuck job never looks like a busy one.
  // Zero: never.
  absl::Duration stall_note_interval = absl::Seconds(30);
};

// Whether a communicator created with `options` checks collectives
// (options.check_collectives unless TANDEM_DISTRIBUTED_DEBUG is DETAIL or
// OFF).
bool CheckCollectivesEnabled(const MpiOptions& options);

class MpiCommunicator final : public PerOperationFront {
 public:
  // Initialises MPI if nobody has (MPI_Init_thread asking for
  // MPI_THREAD_SERIALIZED; finalised again by the destructor of the
  // communicator that initialised it) and duplicates MPI_COMM_WORLD.
  // Fails with kFailedPrecondition if the MPI library provides a lower
  // thread level, or if MPI was already finalised.
  static absl::StatusOr<std::unique_ptr<MpiCommunicator>> Create(
      const MpiOptions& options = {});

  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }
  // Rank and size among the processes on this node (MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // MPI_Comm_split of this communicator, after a checked and timed
  // all-gather of every rank's (color, key) so that a rank that never
  // arrives fails the split at the timeout instead of hanging in
  // MPI_Comm_split. The result has this communicator's options; it must be
  // destroyed before this one (and before MPI_Finalize).
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                      int key) override;

 protected:
  // MPI's own limits: counts fit an int; an in-place AllGather's send is
  // exactly this rank's slice of recv.
  absl::Status CheckOperation(const Operation& op) override;
  // Each numbers the operation and starts it (after the collective check,
  // when on) as one non-blocking MPI call.
  std::unique_ptr<Work> PostAllReduce(BufferView buf, ReduceOp op) override;
  std::unique_ptr<Work> PostBroadcast(BufferView buf, int root) override;
  std::unique_ptr<Work> PostAllGather(BufferView send,
                                      BufferView recv) override;
  std::unique_ptr<Work> PostReduceScatter(BufferView send, BufferView recv,
                                          ReduceOp op) override;
  std::unique_ptr<Work> PostSend(BufferView buf, int peer) override;
  std::unique_ptr<Work> PostRecv(BufferView buf, int peer) override;
  std::unique_ptr<Work> PostBarrier() override;

 private:
  struct Impl;
  explicit MpiCommunicator(std::unique_ptr<Impl> impl);
  // Fills ranks, sizes and the check around an Impl whose comm (and
  // check_comm, when checking) are set.
  static std::unique_ptr<MpiCommunicator> Wrap(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

// Ends every process of the job (MPI_Abort on MPI_COMM_WORLD) with `code`.
// For binaries, after an unrecoverable communication error; never called by
// the library itself.
void MpiAbort(int code);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_MPI_MPI_COMMUNICATOR_H_
