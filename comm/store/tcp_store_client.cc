// The store's client: a blocking socket whose every send and receive is
// bounded by poll() against a deadline.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/store/tcp_store.h"
#include "comm/store/wire.h"

namespace tandem::comm {
namespace {

namespace wire = store_wire;

int64_t Millis(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return int64_t{1} << 50;
  return std::max<int64_t>(0, absl::ToInt64Milliseconds(d));
}

// poll() timeout until `deadline`, at least 0.
int PollMs(absl::Time deadline) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 1 << 30));
}

// One non-blocking connect attempt bounded by `deadline`; the connected fd
// (back in blocking mode) or -1 with errno set.
int TryConnect(const sockaddr_in& addr, absl::Time deadline) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = poll(&p, 1, PollMs(deadline));
    if (rc == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    } else {
      rc = -1;
      errno = ETIMEDOUT;
    }
  }
  if (rc != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  fcntl(fd, F_SETFL, flags);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    const TcpStoreClientOptions& options) {
  const std::string address = absl::StrCat(options.host, ":", options.port);
  if (options.port < 1 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP store at ", address,
                     ": the port must be in [1, 65535] (MASTER_PORT)"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP store at ", address, ": the timeout must be positive"));
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(options.host.c_str(), nullptr, &hints, &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TCP store at ", address, ": host '", options.host,
        "' does not resolve to an IPv4 address (check MASTER_ADDR)"));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(found->ai_addr);
  freeaddrinfo(found);
  addr.sin_port = htons(static_cast<uint16_t>(options.port));

  const absl::Time deadline = absl::Now() + options.timeout;
  absl::Duration backoff = absl::Milliseconds(10);
  int last_errno = 0;
  while (true) {
    int fd = TryConnect(addr, deadline);
    if (fd >= 0) {
      return std::unique_ptr<TcpStoreClient>(
          new TcpStoreClient(fd, address, options.timeout));
    }
    last_errno = errno;
    if (absl::Now() + backoff >= deadline) break;
    std::this_thread::sleep_for(absl::ToChronoMicroseconds(backoff));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "could not reach the TCP store at ", address, " within ",
      absl::FormatDuration(options.timeout),
      " (last error: ", std::strerror(last_errno),
      "); is the launcher (or rank 0) up, and are MASTER_ADDR/MASTER_PORT "
      "right?"));
}

TcpStoreClient::TcpStoreClient(int fd, std::string address,
                               absl::Duration timeout)
    : fd_(fd), address_(std::move(address)), timeout_(timeout) {}

TcpStoreClient::~TcpStoreClient() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::string> TcpStoreClient::Call(const std::string& request,
                                                 absl::Duration wait_budget,
                                                 const std::string& what) {
  const std::string prefix =
      absl::StrCat("TCP store at ", address_, ": ", what, ": ");
  if (fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        prefix, "the connection broke on an earlier request; reconnect"));
  }
  // The server answers a wait within its budget; allow the client's timeout
  // again on top for the exchange itself before calling the server dead.
  const absl::Time deadline = absl::Now() + wait_budget + timeout_;
  auto fail = [&](const std::string& why) {
    close(fd_);
    fd_ = -1;
    return absl::UnavailableError(absl::StrCat(prefix, why));
  };
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd_, POLLOUT, 0};
    if (poll(&p, 1, PollMs(deadline)) != 1) {
      return fail("the server did not accept the request in time");
    }
    ssize_t n =
        send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(absl::StrCat("send: ", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  std::string in;
  size_t need = 4;
  bool have_length = false;
  while (in.size() < need) {
    pollfd p{fd_, POLLIN, 0};
    int rc = poll(&p, 1, PollMs(deadline));
    if (rc == 0) return fail("no reply from the server in time");
    if (rc < 0 && errno == EINTR) continue;
    char buf[65536];
    ssize_t n = recv(fd_, buf, std::min(sizeof(buf), need - in.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return fail("connection closed by the server (did it stop?)");
    if (n < 0) return fail(absl::StrCat("recv: ", std::strerror(errno)));
    in.append(buf, static_cast<size_t>(n));
    if (!have_length && in.size() == 4) {
      const uint32_t len = wire::FrameLength(in.data());
      if (len > wire::kMaxFrame) return fail("reply frame too large");
      need = 4 + len;
      have_length = true;
    }
  }
  return in.substr(4);
}

absl::Status TcpStoreClient::Set(const std::string& key,
                                 const std::string& value) {
  wire::Writer w;
  w.U8(wire::kSet);
  w.Str(key);
  w.Str(value);
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<std::string> reply =
      Call(w.Frame(), absl::ZeroDuration(), absl::StrCat("set '", key, "'"));
  if (!reply.ok()) return reply.status();
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key) {
  wire::Writer w;
  w.U8(wire::kGet);
  w.Str(key);
  w.I64(Millis(timeout_));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = absl::StrCat("get '", key, "'");
  absl::StatusOr<std::string> reply = Call(w.Frame(), timeout_, what);
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  std::optional<uint8_t> status = r.U8();
  if (status == wire::kOk) {
    if (std::optional<std::string> value = r.Str()) return *value;
  } else if (status == wire::kTimeout) {
    return absl::DeadlineExceededError(
        absl::StrCat("TCP store at ", address_, ": ", what,
                     ": key not set within ", absl::FormatDuration(timeout_)));
  }
  return absl::InternalError(
      absl::StrCat("TCP store at ", address_, ": ", what, ": bad reply"));
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key,
                                            int64_t delta) {
  wire::Writer w;
  w.U8(wire::kAdd);
  w.Str(key);
  w.I64(delta);
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = absl::StrCat("add '", key, "'");
  absl::StatusOr<std::string> reply =
      Call(w.Frame(), absl::ZeroDuration(), what);
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  std::optional<uint8_t> status = r.U8();
  if (status == wire::kOk) {
    if (std::optional<int64_t> v = r.I64()) return *v;
  } else if (status == wire::kError) {
    if (std::optional<std::string> msg = r.Str()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TCP store at ", address_, ": ", *msg));
    }
  }
  return absl::InternalError(
      absl::StrCat("TCP store at ", address_, ": ", what, ": bad reply"));
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys) {
  return Wait(keys, timeout_);
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys,
                                  absl::Duration timeout) {
  wire::Writer w;
  w.U8(wire::kWait);
  w.Keys(keys);
  w.I64(Millis(timeout));
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = absl::StrCat("wait for ", keys.size(), " key(s)");
  absl::StatusOr<std::string> reply = Call(w.Frame(), timeout, what);
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  std::optional<uint8_t> status = r.U8();
  if (status == wire::kOk) return absl::OkStatus();
  if (status == wire::kTimeout) {
    if (std::optional<std::vector<std::string>> missing = r.Keys()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "TCP store at ", address_, ": waited ", absl::FormatDuration(timeout),
          " for ", keys.size(),
          " key(s); still missing: ", absl::StrJoin(*missing, ", ")));
    }
  }
  return absl::InternalError(
      absl::StrCat("TCP store at ", address_, ": ", what, ": bad reply"));
}

absl::StatusOr<bool> TcpStoreClient::Check(
    const std::vector<std::string>& keys) {
  wire::Writer w;
  w.U8(wire::kCheck);
  w.Keys(keys);
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<std::string> reply =
      Call(w.Frame(), absl::ZeroDuration(), "check");
  if (!reply.ok()) return reply.status();
  wire::Reader r(*reply);
  std::optional<uint8_t> status = r.U8();
  std::optional<uint8_t> all = r.U8();
  if (status != wire::kOk || !all) {
    return absl::InternalError(
        absl::StrCat("TCP store at ", address_, ": check: bad reply"));
  }
  return *all == 1;
}

}  // namespace tandem::comm
