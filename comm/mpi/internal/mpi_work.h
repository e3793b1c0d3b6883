// MpiWork (one in-flight MPI operation) and CollectiveCheck (the fingerprint
// exchange that runs before every collective). Internal to comm/mpi; users see
// MpiCommunicator.
//
// The check: every collective first exchanges its fingerprint (op, sequence
// number, dtype, count, root, reduce op; comm/fingerprint.h) with every rank
// through one MPI_Iallgather of kFingerprintWords int64 words per rank, on a
// communicator of its own. Only when every rank's fingerprint equals this
// rank's does the data operation start, on the data communicator; otherwise
// the operation fails on every rank (each rank sees the same gathered words)
// with all fingerprints and the ranks that issued them, and no data operation
// reaches MPI. Data operations start in issue order (a FIFO of checked
// Works), so MPI sees the same collective order on every rank whichever Work
// the caller polls first. The communicator stays usable after a mismatch:
// every rank failed that one operation.
#ifndef TANDEM_COMM_MPI_INTERNAL_MPI_WORK_H_
#define TANDEM_COMM_MPI_INTERNAL_MPI_WORK_H_

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/work.h"

namespace tandem::comm::mpi_internal {

// "<call> on rank <rank> failed: <MPI's error string>".
absl::Status MpiError(absl::string_view call, int code, int rank);

// Keeps `buffer` alive until the process ends, because an MPI request that
// will never be completed still reads or writes it. MPI can neither cancel
// nor free a nonblocking collective (MPI_Cancel and MPI_Request_free on one
// are erroneous), so once its owner is destroyed while it is in flight
// (after a timeout, or a Work dropped unwaited) any later progress call,
// MPI_Finalize's included, may still move a peer's data into it: freeing it
// then corrupts the heap (the buffer's memory reused, or malloc's chunk
// headers overwritten). Kept buffers are never freed (the process ends
// after such a failure); they stay reachable, so leak checkers do not
// report them. Thread-safe.
void KeepForMpi(std::shared_ptr<const void> buffer);
// How many buffers KeepForMpi holds (for tests).
int64_t KeptForMpiCount();

// How a Work waits: its rank, the per-operation timeout (from issue), and
// how often rank 0 prints "still waiting for ..." to stderr while blocked
// (zero: never).
struct WaitPolicy {
  int rank = 0;
  absl::Duration timeout = absl::Minutes(5);
  absl::Duration stall_note_interval = absl::ZeroDuration();
};

class CollectiveCheck;

class MpiWork final : public Work {
 public:
  MpiWork(WorkRecord record, const WaitPolicy& policy);
  // Leaves a check still in flight to the CollectiveCheck; a data operation
  // still in flight (timed out, or never waited) keeps scratch() alive
  // through KeepForMpi, since MPI may still write into it.
  ~MpiWork() override;

  // Takes ownership of a started request.
  void AddRequest(MPI_Request request) { requests_.push_back(request); }
  std::vector<float>& scratch() { return scratch_; }
  // Runs once, after MPI completes the requests (e.g. divide for Avg).
  void set_finish(std::function<void()> finish) { finish_ = std::move(finish); }
  // Completes the Work with `status`.
  void Fail(absl::Status status);

  // Starts the data operation (adds its requests). Called at once, or by
  // `check` once every rank's fingerprint matched.
  using Launch = std::function<absl::Status(MpiWork&)>;
  void Start(Launch launch, CollectiveCheck* check);

  bool IsCompleted() override;
  absl::Status Wait(absl::Duration timeout) override;

 private:
  friend class CollectiveCheck;

  void Poll();
  // "AllReduce #12 (f32 x 1024, sum)".
  std::string Name() const;
  // Where the operation stands, for notes and timeout messages.
  std::string Progress() const;
  void MaybeNote(absl::Time now, absl::Time& next_note);

  const WaitPolicy policy_;
  const absl::Time deadline_;
  CollectiveCheck* check_ = nullptr;  // non-null while waiting for the check
  bool checked_ = false;              // every rank's fingerprint matched
  std::vector<MPI_Request> requests_;
  std::vector<float> scratch_;
  std::function<void()> finish_;
  bool done_ = false;
  absl::Status status_;
};

// The fingerprint exchange of one MpiCommunicator (see the file comment).
// Outlives its Works.
class CollectiveCheck {
 public:
  // `comm`: a communicator used for nothing else.
  CollectiveCheck(MPI_Comm comm, int rank, int size);
  // Exchanges still in flight (a rank never issued the collective: this
  // rank timed out) hand their buffers to KeepForMpi: the late ranks' data
  // still arrives in them, during any later MPI call or MPI_Finalize.
  // Call before MPI_Comm_free of `comm` and before MPI_Finalize.
  ~CollectiveCheck();
  CollectiveCheck(const CollectiveCheck&) = delete;
  CollectiveCheck& operator=(const CollectiveCheck&) = delete;

  // Sends `work`'s fingerprint and queues its launch behind earlier ones.
  void Enqueue(MpiWork& work, MpiWork::Launch launch);
  // Forgets `work` (destroyed before its check finished).
  void Remove(MpiWork& work);
  // Launches (or fails) queued Works, oldest first, while their exchange
  // has completed.
  void Advance();

 private:
  struct Pending {
    MpiWork* work;
    MpiWork::Launch launch;
    MPI_Request request;
    std::vector<int64_t> gathered;  // size * kFingerprintWords
    EncodedFingerprint mine;
  };
  // Error naming every distinct fingerprint and its ranks, or OK
  // (CompareGatheredFingerprints).
  absl::Status Compare(const Pending& p) const;

  const MPI_Comm comm_;
  const int rank_;
  const int size_;
  std::list<Pending> queue_;  // a list: MPI holds pointers into entries
};

}  // namespace tandem::comm::mpi_internal

#endif  // TANDEM_COMM_MPI_INTERNAL_MPI_WORK_H_
