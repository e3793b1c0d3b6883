// The store's server: one thread polls the listening socket, a wake pipe and
// every connection. Requests are handled in arrival order; a get or wait
// whose keys are not all there is parked on its connection (that client sends
// nothing else meanwhile) and answered when a set/add completes it or its
// deadline passes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/store/tcp_store.h"
#include "comm/store/wire.h"

namespace tandem::comm {
namespace {

using Clock = std::chrono::steady_clock;
namespace wire = store_wire;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(
      absl::StrCat("TCP store server: ", what, ": ", std::strerror(errno)));
}

struct Parked {
  wire::Op op;  // kGet or kWait
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

struct Conn {
  int fd = -1;
  std::string in;
  std::string out;
  std::optional<Parked> parked;
};

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(int listen_fd, int wake_fd) : listen_fd_(listen_fd), wake_fd_(wake_fd) {}
  ~Loop() {
    for (Conn& c : conns_) close(c.fd);
  }

  void Run() {
    while (true) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({wake_fd_, POLLIN, 0});
      for (const Conn& c : conns_) {
        short events = POLLIN;
        if (!c.out.empty()) events |= POLLOUT;
        fds.push_back({c.fd, events, 0});
      }
      int timeout_ms = -1;
      const Clock::time_point now = Clock::now();
      for (const Conn& c : conns_) {
        if (!c.parked) continue;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              c.parked->deadline - now)
                              .count() +
                          1;
        const int ms = static_cast<int>(std::max<int64_t>(0, left));
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
        return;  // unrecoverable; clients see their connections close
      }
      if (fds[1].revents != 0) return;  // the destructor asked us to stop
      if (fds[0].revents & POLLIN) Accept();
      // conns_ may grow in Accept; only the first fds.size()-2 were polled.
      std::vector<bool> dead(conns_.size(), false);
      for (size_t i = 2; i < fds.size(); ++i) {
        Conn& c = conns_[i - 2];
        if (fds[i].revents & (POLLERR | POLLNVAL)) dead[i - 2] = true;
        if (!dead[i - 2] && (fds[i].revents & (POLLIN | POLLHUP))) {
          dead[i - 2] = !ReadFrom(c);
        }
        if (!dead[i - 2] && (fds[i].revents & POLLOUT)) {
          dead[i - 2] = !Flush(c);
        }
      }
      ExpireParked();
      for (size_t i = conns_.size(); i-- > 0;) {
        if (i < dead.size() && dead[i]) {
          close(conns_[i].fd);
          conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(i));
        }
      }
    }
  }

 private:
  void Accept() {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn conn;
    conn.fd = fd;
    conns_.push_back(std::move(conn));
  }

  // False when the peer closed or sent garbage.
  bool ReadFrom(Conn& c) {
    char buf[65536];
    while (true) {
      ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return false;
      }
      c.in.append(buf, static_cast<size_t>(n));
    }
    while (!c.parked && c.in.size() >= 4) {
      const uint32_t len = wire::FrameLength(c.in.data());
      if (len > wire::kMaxFrame) return false;
      if (c.in.size() < 4 + static_cast<size_t>(len)) break;
      const std::string body = c.in.substr(4, len);
      c.in.erase(0, 4 + static_cast<size_t>(len));
      if (!Handle(c, body)) return false;
    }
    return Flush(c);
  }

  bool Flush(Conn& c) {
    while (!c.out.empty()) {
      ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
        if (errno == EINTR) continue;
        return false;
      }
      c.out.erase(0, static_cast<size_t>(n));
    }
    return true;
  }

  static void Queue(Conn& c, const wire::Writer& reply) {
    c.out += reply.Frame();
  }

  bool Handle(Conn& c, const std::string& body) {
    wire::Reader r(body);
    std::optional<uint8_t> op = r.U8();
    if (!op) return false;
    switch (*op) {
      case wire::kSet: {
        std::optional<std::string> key = r.Str();
        std::optional<std::string> value = r.Str();
        if (!key || !value) return false;
        data_[*key] = std::move(*value);
        wire::Writer w;
        w.U8(wire::kOk);
        Queue(c, w);
        WakeParked();
        return true;
      }
      case wire::kAdd: {
        std::optional<std::string> key = r.Str();
        std::optional<int64_t> delta = r.I64();
        if (!key || !delta) return false;
        int64_t value = 0;
        auto it = data_.find(*key);
        wire::Writer w;
        if (it != data_.end() && !absl::SimpleAtoi(it->second, &value)) {
          w.U8(wire::kError);
          w.Str(absl::StrCat("add on key '", *key, "' whose value '",
                             it->second, "' is not an integer"));
          Queue(c, w);
          return true;
        }
        value += *delta;
        data_[*key] = absl::StrCat(value);
        w.U8(wire::kOk);
        w.I64(value);
        Queue(c, w);
        WakeParked();
        return true;
      }
      case wire::kGet:
      case wire::kWait: {
        std::vector<std::string> keys;
        if (*op == wire::kGet) {
          std::optional<std::string> key = r.Str();
          if (!key) return false;
          keys.push_back(std::move(*key));
        } else {
          std::optional<std::vector<std::string>> k = r.Keys();
          if (!k) return false;
          keys = std::move(*k);
        }
        std::optional<int64_t> timeout_ms = r.I64();
        if (!timeout_ms) return false;
        c.parked = Parked{
            static_cast<wire::Op>(*op), std::move(keys),
            Clock::now() +
                std::chrono::milliseconds(std::max<int64_t>(0, *timeout_ms))};
        TryAnswer(c, /*expired=*/false);
        return true;
      }
      case wire::kCheck: {
        std::optional<std::vector<std::string>> keys = r.Keys();
        if (!keys) return false;
        bool all = true;
        for (const std::string& k : *keys) all = all && data_.count(k) > 0;
        wire::Writer w;
        w.U8(wire::kOk);
        w.U8(all ? 1 : 0);
        Queue(c, w);
        return true;
      }
      default:
        return false;
    }
  }

  // Answers c's parked request when its keys are all there, or (expired)
  // with the keys still missing.
  void TryAnswer(Conn& c, bool expired) {
    std::vector<std::string> missing;
    for (const std::string& k : c.parked->keys) {
      if (data_.count(k) == 0) missing.push_back(k);
    }
    wire::Writer w;
    if (missing.empty()) {
      w.U8(wire::kOk);
      if (c.parked->op == wire::kGet) w.Str(data_[c.parked->keys[0]]);
    } else if (expired) {
      w.U8(wire::kTimeout);
      w.Keys(missing);
    } else {
      return;
    }
    Queue(c, w);
    c.parked.reset();
  }

  void WakeParked() {
    for (Conn& c : conns_) {
      if (!c.parked) continue;
      TryAnswer(c, /*expired=*/false);
      if (!c.parked) ResumeAndFlush(c);
    }
  }

  void ExpireParked() {
    const Clock::time_point now = Clock::now();
    for (Conn& c : conns_) {
      if (!c.parked) continue;
      TryAnswer(c, /*expired=*/c.parked->deadline <= now);
      if (!c.parked) ResumeAndFlush(c);
    }
  }

  // A connection just unparked: flush the reply (errors surface on the next
  // poll as POLLERR/POLLHUP).
  void ResumeAndFlush(Conn& c) { Flush(c); }

  const int listen_fd_;
  const int wake_fd_;
  std::vector<Conn> conns_;  // only the serving thread touches these
  std::map<std::string, std::string> data_;
};

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  const std::string host =
      options.bind_address.empty() ? "0.0.0.0" : options.bind_address;
  const std::string where = absl::StrCat(host, ":", options.port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (options.port < 0 || options.port > 65535 ||
      inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP store server: cannot listen on ", where,
                     "; expected a dotted IPv4 address and a port in "
                     "[0, 65535]"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket()");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 1024) != 0) {
    absl::Status s = Errno(absl::StrCat(
        "cannot listen on ", where,
        " (is another job using this port? pick another --master_port)"));
    close(fd);
    return s;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    absl::Status s = Errno("pipe()");
    close(fd);
    return s;
  }
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(fd, pipe_fds[0], pipe_fds[1], ntohs(addr.sin_port)));
}

TcpStoreServer::TcpStoreServer(int listen_fd, int wake_read, int wake_write,
                               int port)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port),
      loop_(std::make_unique<Loop>(listen_fd, wake_read)) {
  thread_ = std::thread([this] { loop_->Run(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char byte = 1;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  loop_.reset();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

}  // namespace tandem::comm
