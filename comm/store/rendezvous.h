// The arrival check every store-bootstrapped engine starts with: each rank
// announces itself under `prefix` and waits for all the others, so a world
// that never fills up fails with the ranks that did not arrive.
//
//   RETURN_IF_ERROR(ArriveAndWait(client, "gloo/0", rank, world_size));
//
// Blocks up to the client's timeout. Thread-safe as the client is.
#ifndef TANDEM_COMM_STORE_RENDEZVOUS_H_
#define TANDEM_COMM_STORE_RENDEZVOUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

// Sets "<prefix>/arrived/<rank>" and waits for every rank's key. On timeout:
// DeadlineExceeded "rank R of W: ranks 2, 3 did not arrive at the TCP store
// at HOST:PORT within T" plus what to check. With a positive
// `stall_note_interval`, rank 0 prints the stall note (comm/stall_note.h)
// every interval while ranks are missing, naming them.
absl::Status ArriveAndWait(
    TcpStoreClient& client, const std::string& prefix, int rank, int world_size,
    absl::Duration stall_note_interval = absl::ZeroDuration());

}  // namespace tandem::comm

#endif  // TANDEM_COMM_STORE_RENDEZVOUS_H_
