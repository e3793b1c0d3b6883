#include "comm/gloo/gloo_thread_launcher.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_communicator.h"

namespace tandem::comm {

namespace {
constexpr int kMaxThreadRanks = 16;
}  // namespace

GlooThreadLauncher::GlooThreadLauncher(absl::Duration timeout)
    : timeout_(timeout) {}

GlooThreadLauncher::~GlooThreadLauncher() = default;

absl::Status GlooThreadLauncher::CanRun(int world_size) const {
  if (world_size < 1 || world_size > kMaxThreadRanks) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gloo-threads runs 1 to ", kMaxThreadRanks, " ranks, not ", world_size,
        "; for more start one process per rank with tandemrun"));
  }
  return absl::OkStatus();
}

std::vector<RankStatus> GlooThreadLauncher::Run(int world_size,
                                                const RankFn& fn) {
  std::vector<RankStatus> statuses(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) statuses[r].rank = r;
  if (absl::Status s = CanRun(world_size); !s.ok()) {
    for (RankStatus& st : statuses) st.status = s;
    return statuses;
  }
  if (server_ == nullptr) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
        TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
    if (!server.ok()) {
      for (RankStatus& st : statuses) st.status = server.status();
      return statuses;
    }
    server_ = std::move(*server);
  }
  const std::string prefix = absl::StrCat("threads/run", runs_++);
  const int port = server_->port();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
          TcpStoreClient::Connect(
              {.host = "127.0.0.1", .port = port, .timeout = timeout_});
      if (!client.ok()) {
        statuses[r].status = client.status();
        return;
      }
      GlooOptions options;
      options.rank = r;
      options.size = world_size;
      options.store = client->get();
      options.prefix = prefix;
      options.timeout = timeout_;
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
          GlooCommunicator::Create(options);
      statuses[r].status = comm.ok() ? fn(r, **comm) : comm.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

}  // namespace tandem::comm
