// A TCP key-value store for rendezvous, with the semantics of PyTorch's
// c10d TCPStore: one process (rank 0 or the launcher) hosts a TcpStoreServer
// at MASTER_ADDR:MASTER_PORT; every process opens a TcpStoreClient to it and
// uses set / get / wait / add to exchange addresses, unique ids and counters.
//
//   absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
//       TcpStoreServer::Start({.port = 29500});           // port 0: any free
//   absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
//       TcpStoreClient::Connect({.host = "127.0.0.1", .port = 29500,
//                                .timeout = absl::Seconds(30)});
//   (*client)->Set("rank/0", "10.0.0.1:4000");
//   absl::StatusOr<std::string> peer = (*client)->Get("rank/1");  // blocks
//   absl::StatusOr<int64_t> arrived = (*client)->Add("arrived", 1);
//
// Semantics (as c10d):
//   Set(key, value)  stores or overwrites; wakes every waiter on key.
//   Get(key)         blocks until key exists, then returns its value.
//   Wait(keys)       blocks until every key exists.
//   Add(key, delta)  treats the value as a decimal int64 (absent = 0), adds
//                    delta, stores and returns the sum; atomic across clients.
//   Check(keys)      true when every key exists; never blocks.
// Every blocking call is bounded by the client's timeout: the server answers
// a wait that does not complete in time with the keys still missing, and the
// client gives up on a server that does not answer at all. Errors name the
// store's address and, for waits, the missing keys; a key named "rank/<r>"
// style is left as is, so callers that wait for one key per rank get the
// ranks that never arrived in the message.
//
// Threads: the server runs one thread (poll over all connections, no thread
// per client) that it joins in its destructor. A client is thread-safe
// (requests are serialised by a mutex) but one blocking Get holds the
// connection: give each thread its own client for concurrent waits.
#ifndef TANDEM_COMM_STORE_TCP_STORE_H_
#define TANDEM_COMM_STORE_TCP_STORE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::comm {

struct TcpStoreServerOptions {
  // The address to listen on; "0.0.0.0" (all interfaces) when empty.
  std::string bind_address;
  // The port; 0 asks the kernel for a free one (see TcpStoreServer::port()).
  int port = 0;
};

class TcpStoreServer {
 public:
  // Listens and starts the serving thread. Fails (naming the address) when
  // the port is taken or the address is not an IPv4 address.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      const TcpStoreServerOptions& options);
  // Stops the serving thread and closes every connection; clients still
  // waiting get an error naming the address ("connection closed").
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port actually listened on.
  int port() const { return port_; }

 private:
  class Loop;
  TcpStoreServer(int listen_fd, int wake_read, int wake_write, int port);

  int listen_fd_;
  int wake_read_;  // the serving thread polls it; a byte means stop
  int wake_write_;
  int port_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

struct TcpStoreClientOptions {
  std::string host = "127.0.0.1";  // a dotted IPv4 address or a host name
  int port = 0;
  // Bounds connecting (retried while the server is not up yet) and every
  // blocking call; positive.
  absl::Duration timeout = absl::Seconds(300);
};

class TcpStoreClient {
 public:
  // Connects, retrying until options.timeout while nobody listens (the
  // server may start after its clients). DeadlineExceeded naming the address
  // when it never answers; InvalidArgument for a host that does not resolve
  // or a port outside [1, 65535].
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(
      const TcpStoreClientOptions& options);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  absl::Status Set(const std::string& key, const std::string& value);
  // DeadlineExceeded naming the key and address when it does not appear
  // within the timeout.
  absl::StatusOr<std::string> Get(const std::string& key);
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // DeadlineExceeded listing the keys still missing.
  absl::Status Wait(const std::vector<std::string>& keys);
  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration timeout);
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys);

  // "host:port", for messages.
  const std::string& address() const { return address_; }
  absl::Duration timeout() const { return timeout_; }

 private:
  TcpStoreClient(int fd, std::string address, absl::Duration timeout);
  // Sends one request and reads its reply; `wait_budget` is how long the
  // server may legitimately take (a wait's timeout) before the reply.
  absl::StatusOr<std::string> Call(const std::string& request,
                                   absl::Duration wait_budget,
                                   const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);  // -1 after a broken exchange
  const std::string address_;
  const absl::Duration timeout_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_STORE_TCP_STORE_H_
