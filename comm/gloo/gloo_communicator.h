// GlooCommunicator: the Communicator contract (comm/communicator.h) over
// Gloo's TCP transport, the library behind PyTorch's gloo backend. One
// process per rank; the ranks find each other through the TCP store
// (comm/store/tcp_store.h), as torch.distributed.init_process_group("gloo")
// does through c10d's TCPStore.
//
//   absl::StatusOr<std::unique_ptr<TcpStoreClient>> store =
//       TcpStoreClient::Connect({.host = "127.0.0.1", .port = 29500,
//                                .timeout = absl::Seconds(300)});
//   absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
//       GlooCommunicator::Create({.rank = r, .size = n, .store = store->get(),
//                                 .prefix = "job0"});
//   TANDEM_RETURN_IF_ERROR((*comm)->AllReduce(view, ReduceOp::kSum)->Wait());
//
// Execution: every operation is queued at issue and run, in issue order, by
// the communicator's one worker thread (Gloo's collectives block), so
// operations complete in issue order, as every rank issues them in the same
// order. Send and Recv are posted by that thread in order and complete on
// their own (a second thread waits for them), so a ring of Send-then-Recv
// never deadlocks.
// Arithmetic: results equal the simulated cluster's bit for bit wherever the
// order of combination cannot matter (the conformance patterns): f16/bf16 are
// reduced in f32 and rounded once; Avg is the Sum divided by the world size;
// ReduceScatter is an all-reduce of the whole send buffer of which each rank
// keeps its slice (Gloo has no reduce-scatter for arbitrary sizes).
// Checked (GlooOptions::check_collectives, on by default): every collective
// first all-gathers each rank's fingerprint, so ranks that disagree fail
// that operation with an error naming them, as on sim and mpi.
// Errors: a Gloo failure (a peer gone, the timeout passed) fails that Work
// and every later one (kAborted, naming the first failure): the connections
// are not usable after it. Every operation is bounded by options.timeout.
// Sub-communicators (Split): a collective of this communicator; the
// members are decided by an all-gather of (color, key) over it, then each
// color connects a GlooCommunicator of its own (its own Gloo context,
// connections and threads, with this one's options) through the same store
// under "<prefix>/split<n>/color<c>", n counting this communicator's splits,
// so repeated and nested splits never share keys. The child's failures are
// its own: an error poisons only the communicator it happened on.
// Thread-safety: as every Communicator, one rank's calls come from one
// thread; the Works may be waited from that thread.
#ifndef TANDEM_COMM_GLOO_GLOO_COMMUNICATOR_H_
#define TANDEM_COMM_GLOO_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/front.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // The rendezvous: used by Create and by Split (which connects each
  // sub-communicator through it), from the rank's thread only. Not owned;
  // must outlive the communicator and every communicator split from it.
  TcpStoreClient* store = nullptr;
  // Keys of this communicator's rendezvous start with it; communicators
  // created over one store need distinct prefixes. Split derives its
  // children's prefixes from it (see Split).
  std::string prefix = "gloo";
  // The address this rank listens on for its peers; empty: 127.0.0.1 when
  // the store is on a loopback address, else this host's name.
  std::string hostname;
  // Bounds the rendezvous and every operation.
  absl::Duration timeout = absl::Seconds(300);
  // While the rendezvous or a Wait is stuck, rank 0 prints the stall note
  // (comm/stall_note.h) every interval, naming the ranks that have not
  // arrived or not reached the collective (every waiting rank reports
  // through the store at its own interval; a failed operation's error then
  // names them too). Zero: silent, as before.
  absl::Duration stall_note_interval = absl::Seconds(30);
  // Check every collective, as sim and mpi do: before its data moves, each
  // rank's fingerprint (sequence number, op, dtype, count, root, reduce op)
  // is all-gathered; when they differ every rank fails that operation with
  // kFailedPrecondition naming each fingerprint and its ranks, instead of
  // hanging or corrupting data. TANDEM_DISTRIBUTED_DEBUG=OFF turns it off,
  // DETAIL on; on for every rank when on for any. Costs one small
  // all-gather per collective.
  bool check_collectives = true;
  // Instead of `hostname`, the network interface whose address to listen on
  // ("eth0", "ib0"), like PyTorch's GLOO_SOCKET_IFNAME, which is read when both
  // this and `hostname` are empty. An interface this host lacks is
  // InvalidArgument.
  std::string iface;
};

class GlooCommunicator final : public EngineFront {
 public:
  // Arrives at the store (an error names the ranks that never did), then
  // connects a full mesh of TCP pairs. Blocks up to options.timeout.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(
      const GlooOptions& options);
  // Finishes the queued operations (each bounded by the timeout), then
  // closes the connections.
  ~GlooCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string_view backend() const override { return "gloo"; }

  // See "Sub-communicators" above and in comm/communicator.h. Blocks until
  // every member of this rank's color has connected (bounded by the
  // timeout). Errors: the all-gather's (a rank that never calls Split fails
  // it at the timeout), InvalidArgument naming a rank with a color below
  // kNoColor (on every rank), the child's Create errors (prefixed with the
  // split and color).
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                      int key) override;

  class Impl;

 protected:
  // Numbers a checked operation (comm/front.h) and queues it for the worker
  // thread (collectives, in issue order) or the waiter (Send/Recv).
  std::unique_ptr<Work> Post(const Operation& op) override;

 private:
  // `split_base`: the options a child starts from (the store, this
  // communicator's prefix, the resolved listening address, the timeout and
  // the agreed collective check).
  GlooCommunicator(std::unique_ptr<Impl> impl, GlooOptions split_base);
  std::unique_ptr<Impl> impl_;
  const GlooOptions split_base_;
  int64_t splits_ = 0;  // Split calls so far; the rank's thread only
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_GLOO_GLOO_COMMUNICATOR_H_
