// Uneven inputs: train::Join, after torch.distributed.algorithms.join.Join.
// When ranks have different numbers of batches (a user's own sampler, a data
// set that is not padded), a rank that runs out of batches calls
// Join::Finish(), which keeps answering the collectives of the ranks still
// training — one "shadow" step per step of theirs — until every rank has
// finished; then every rank runs the joinables' post hooks (DDP: agree on
// the final model). Without a Join the finished rank's missing collectives
// fail the others (the communicator's timeout, naming the ranks that
// stopped).
//
//   TANDEM_ASSIGN_OR_RETURN(auto ddp,
//                           train::DistributedDataParallel::Create(*m, comm));
//   TANDEM_ASSIGN_OR_RETURN(auto join, train::Join::Create({ddp.get()}));
//   for (const Batch& batch : my_batches) {  // any number per rank
//     TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(ddp->Forward(batch.x)));
//     TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
//     TANDEM_RETURN_IF_ERROR(sgd.Step());
//   }
//   TANDEM_RETURN_IF_ERROR(join->Finish());  // PyTorch: leaving the `with`
//
// The protocol (docs/ddp.md, "Uneven inputs"): every step of an active rank
// starts with one all-reduce (sum) of four int64 values, sent by the first
// joinable through NotifyJoinContext: [1, syncs, broadcasts, 0] from an
// active rank, [0, 0, 0, terminate] from a finished one. So every rank learns
// how many ranks still train and what their step's collectives will be; a
// finished rank then calls each joinable's JoinHook::MainHook, which issues
// the same collectives with neutral data (DDP: zero gradients). When the sum
// says no rank is active, every rank runs PostHook(is_last_joiner).
//
// Contract:
//   - Collective: Create is local; Finish is collective (every rank calls it
//     once, after its last step). Between Create and Finish the joinables'
//     collectives are the only ones in the training loop: another collective
//     (a loss all-reduce for logging, a found-inf check) has no shadow, and a
//     rank that finished cannot answer it.
//   - Ownership: the joinables should outlive the Join; one destroyed
//     first leaves it, and Finish then fails (FailedPrecondition). A
//     joinable belongs to at most one Join at a time. ~Join detaches them
//     (no communication); without Finish, a rank that stops early makes the
//     others fail.
//   - Blocking: Finish blocks for as many steps as the slowest rank still
//     has; each collective it issues is bounded by JoinOptions::timeout (and
//     the joinables' own timeouts), so it cannot hang.
//   - Thread-safety: one rank's thread, like the joinables and the
//     communicator.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_JOIN_H_
#define TANDEM_TRAIN_PARALLEL_DDP_JOIN_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tensor/device.h"

namespace tandem::train {

struct JoinOptions {
  // False: Join does nothing (no per-step all-reduce, Finish returns at
  // once), for runs known to be even (PyTorch's `enable`).
  bool enable = true;
  // A rank that finishes makes every rank fail at the next step instead of
  // shadowing (PyTorch's throw_on_early_termination): the finished rank's
  // Finish and the others' next step return FailedPrecondition.
  bool throw_on_early_termination = false;
  // Forwarded to every joinable's hook (PyTorch passes join's kwargs on):
  // DDP divides the summed gradients by the initial world size even when
  // some ranks have finished (true, PyTorch's default), or by the number of
  // ranks still training (false).
  bool divide_by_initial_world_size = true;
  // Bound of each wait on Join's own collectives. Must be positive.
  absl::Duration timeout = absl::Minutes(30);
};

// What the per-step all-reduce told every rank.
struct JoinStep {
  int64_t active_ranks = 0;        // ranks still training
  int64_t syncing_ranks = 0;       // of them, those whose step reduces
  int64_t broadcasting_ranks = 0;  // of them, those that broadcast buffers
  int64_t terminating_ranks = 0;   // finished ranks asking all to stop
};

// A joinable's shadow of its collectives on a rank that has finished.
class JoinHook {
 public:
  virtual ~JoinHook() = default;
  // One step of the active ranks, as `step` describes it: issue the same
  // collectives they issue after NotifyJoinContext, with neutral data.
  virtual absl::Status MainHook(const JoinStep& step) = 0;
  // Once every rank has finished. `is_last_joiner`: this rank shadowed no
  // step (it was among the last to finish). Collective.
  virtual absl::Status PostHook(bool is_last_joiner) = 0;
};

class Join;

// What Join needs from a participant (PyTorch's Joinable).
class Joinable {
 public:
  // Leaves its Join, if any: that Join's Finish then fails instead of
  // calling into a destroyed joinable.
  virtual ~Joinable();
  // The hook that shadows this joinable; errors when the joinable cannot
  // take part with these options (InvalidArgument naming why).
  virtual absl::StatusOr<std::unique_ptr<JoinHook>> MakeJoinHook(
      const JoinOptions& options) = 0;
  // The communicator every collective of the joinable uses, and where its
  // tensors live (Join's own all-reduce is staged there, as NCCL needs).
  virtual comm::Communicator& join_comm() const = 0;
  virtual Device join_device() const = 0;

 protected:
  Joinable() = default;
  // True while this joinable is in an enabled Join.
  bool in_join() const { return join_ != nullptr; }
  const JoinOptions* join_options() const;
  // Called by the joinable at the start of each step, before its own
  // collectives: `syncs` and `broadcasts` describe them. Outside an enabled
  // Join, or when this is not the Join's first joinable: nullopt, no
  // communication. Otherwise the all-reduce above, and what it said;
  // FailedPrecondition when a finished rank asked every rank to stop
  // (throw_on_early_termination). Collective.
  absl::StatusOr<std::optional<JoinStep>> NotifyJoinContext(bool syncs,
                                                            bool broadcasts);

 private:
  friend class Join;
  Join* join_ = nullptr;
  bool is_first_ = false;
};

class Join {
 public:
  // Takes part with `joinables` (at least one, all on one communicator, in
  // no other Join), asking each for its hook. Local; errors are
  // InvalidArgument or FailedPrecondition naming the joinable.
  static absl::StatusOr<std::unique_ptr<Join>> Create(
      std::vector<Joinable*> joinables, const JoinOptions& options = {});
  // Detaches from the joinables; no communication.
  ~Join();

  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank has no more inputs: shadows the active ranks' steps until
  // every rank has called Finish, then runs the post hooks. Collective;
  // call it once. Errors: a failed collective or hook (the other ranks then
  // fail on their next collective), FailedPrecondition under
  // throw_on_early_termination when some rank was still training.
  absl::Status Finish();

  const JoinOptions& options() const { return options_; }
  // Steps this rank shadowed in Finish (0 before it).
  int64_t shadowed_steps() const { return shadowed_steps_; }

 private:
  friend class Joinable;
  Join(std::vector<Joinable*> joinables, const JoinOptions& options);
  // A joinable being destroyed: forget it (its slot becomes null).
  void Forget(Joinable* joinable);
  // The per-step all-reduce of [active, syncs, broadcasts, terminate].
  absl::StatusOr<JoinStep> ExchangeStep(int64_t active, int64_t syncs,
                                        int64_t broadcasts, int64_t terminate);

  std::vector<Joinable*> joinables_;
  std::vector<std::unique_ptr<JoinHook>> hooks_;
  JoinOptions options_;
  comm::Communicator* comm_ = nullptr;
  Device device_;
  bool finished_ = false;
  bool lost_joinable_ = false;  // a joinable was destroyed before Finish
  int64_t shadowed_steps_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_JOIN_H_
