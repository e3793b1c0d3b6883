#include "train/launch/registry.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/launcher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/launch/test_util.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// What the fake engines' launchers saw.
struct Seen {
  int runs = 0;
  int world_size = 0;
  absl::Duration timeout;
  std::vector<int> errors;  // ranks given to on_rank_error
};

// Runs no communicator: each "rank" gets `rank_status(rank)`.
class FakeLauncher : public comm::Launcher {
 public:
  FakeLauncher(Seen* seen, absl::Status can_run,
               std::vector<absl::Status> ranks)
      : seen_(seen), can_run_(std::move(can_run)), ranks_(std::move(ranks)) {}
  std::string name() const override { return "fake"; }
  absl::Status CanRun(int) const override { return can_run_; }
  std::vector<comm::RankStatus> Run(int world_size,
                                    const comm::RankFn&) override {
    ++seen_->runs;
    seen_->world_size = world_size;
    std::vector<comm::RankStatus> out;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      out.push_back({r, ranks_[r]});
    }
    return out;
  }

 private:
  Seen* seen_;
  absl::Status can_run_;
  std::vector<absl::Status> ranks_;
};

Engine FakeEngine(const std::string& name, Seen* seen, bool picks, int order,
                  bool joins = false,
                  std::vector<absl::Status> ranks = {absl::OkStatus()},
                  absl::Status can_run = absl::OkStatus()) {
  Engine e;
  e.name = name;
  e.description = name + " description";
  e.joins_launched_world = joins;
  if (joins) e.launchers = {"OpenMPI", "Slurm"};
  e.auto_order = order;
  e.auto_picks = [picks](const LaunchContext&) { return picks; };
  e.default_world_size = [](const LaunchContext& here) {
    return here.launched_world_size() > 1 ? here.launched_world_size() : 3;
  };
  e.available = [](int world_size, const LaunchContext&) {
    return world_size <= 8 ? absl::OkStatus()
                           : absl::InvalidArgumentError("at most 8 ranks");
  };
  e.make_launcher = [seen, ranks, can_run](const RunOptions& options) {
    seen->timeout = options.timeout;
    return std::make_unique<FakeLauncher>(seen, can_run, ranks);
  };
  e.on_rank_error = [seen](const comm::RankStatus& rs) {
    seen->errors.push_back(rs.rank);
  };
  return e;
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry_.Add(FakeEngine("threads", &seen_, true, 2)).ok());
    ASSERT_TRUE(
        registry_.Add(FakeEngine("procs", &seen_, false, 0, /*joins=*/true))
            .ok());
    ASSERT_TRUE(registry_.Add(FakeEngine("gpus", &seen_, true, 1)).ok());
  }
  Seen seen_;
  LaunchRegistry registry_;
};

TEST_F(RegistryTest, AddRejectsDuplicateReservedAndIncompleteEngines) {
  Seen other;
  EXPECT_THAT(
      std::string(registry_.Add(FakeEngine("gpus", &other, true, 0)).message()),
      HasSubstr("'gpus' is already registered"));
  EXPECT_EQ(registry_.Add(FakeEngine("auto", &other, true, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.Add(FakeEngine("", &other, true, 0)).code(),
            absl::StatusCode::kInvalidArgument);
  Engine incomplete = FakeEngine("x", &other, true, 0);
  incomplete.make_launcher = nullptr;
  EXPECT_THAT(std::string(registry_.Add(incomplete).message()),
              HasSubstr("lacks"));
  EXPECT_EQ(registry_.engines().size(), 3u);
  EXPECT_EQ(registry_.Find("x"), nullptr);
  ASSERT_NE(registry_.Find("procs"), nullptr);
  EXPECT_TRUE(registry_.Find("procs")->joins_launched_world);
}

TEST_F(RegistryTest, HelpIsGeneratedFromTheEngines) {
  EXPECT_EQ(registry_.Choices(), "threads, procs, gpus or auto");
  EXPECT_EQ(registry_.BackendHelp(),
            "threads (threads description), procs (procs description), gpus "
            "(gpus description), or auto: the first of procs, gpus, threads "
            "that fits here.");
}

TEST_F(RegistryTest, AutoTakesTheFirstEngineThatPicksInAutoOrder) {
  absl::StatusOr<ResolvedBackend> b = registry_.Resolve({}, LaunchContext());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->backend, "gpus");  // procs does not pick; gpus precedes threads
  EXPECT_EQ(b->world_size, 3);    // the engine's default
}

TEST_F(RegistryTest, NamedEngineWithWorldSize) {
  absl::StatusOr<ResolvedBackend> b =
      registry_.Resolve(BackendChoice{"threads", 5}, {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->backend, "threads");
  EXPECT_EQ(b->world_size, 5);
}

TEST_F(RegistryTest, UnknownBackendNegativeSizeAndUnavailableAreErrors) {
  absl::Status s = registry_.Resolve(BackendChoice{"gloo", 0}, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unknown --backend=gloo; expected threads, procs, gpus or auto");
  s = registry_.Resolve(BackendChoice{"threads", -1}, {}).status();
  EXPECT_EQ(s.message(), "--world_size=-1; expected 0 (default) or more");
  s = registry_.Resolve(BackendChoice{"threads", 9}, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--backend=threads --world_size=9: at most 8 ranks");
}

TEST_F(RegistryTest, PrivateWorldInsideAnMpiJobIsAnErrorNamingTheFix) {
  for (std::string backend : {"threads", "gpus"}) {
    absl::Status s =
        registry_
            .Resolve(BackendChoice{backend, 0}, LaunchedBy("OpenMPI", 2, 1))
            .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << backend;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("--backend=" + backend +
                          " in a job of 2 processes started by OpenMPI "
                          "(OMPI_COMM_WORLD_SIZE=2, this is rank 1)"));
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("the job would run 2 times"));
    EXPECT_THAT(
        std::string(s.message()),
        HasSubstr("Instead use --backend=procs (each process one rank)"));
  }
  EXPECT_THAT(std::string(registry_
                              .Resolve(BackendChoice{"threads", 0},
                                       LaunchedBy("Slurm", 4, 1))
                              .status()
                              .message()),
              HasSubstr("SLURM_NTASKS=4"));
}

TEST_F(RegistryTest, AutoUnderTorchrunSaysNoEngineJoinsIt) {
  absl::Status s = registry_.Resolve({}, LaunchedBy("torchrun", 2, 1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--backend=auto in a job of 2 processes started by "
                        "torchrun (WORLD_SIZE=2"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("No tandem engine joins a torchrun world here: start "
                        "the job with mpirun -np 2 <binary> --backend=procs"));
}

TEST_F(RegistryTest, AdviceNamesTheEngineThatJoinsTheLauncher) {
  Engine joiner = FakeEngine("tcp", &seen_, false, 5, /*joins=*/true);
  joiner.launchers = {"torchrun"};
  ASSERT_TRUE(registry_.Add(std::move(joiner)).ok());
  absl::Status s =
      registry_
          .Resolve(BackendChoice{"threads", 0}, LaunchedBy("torchrun", 2, 1))
          .status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Instead use --backend=tcp (each process one rank)"));
}

TEST_F(RegistryTest, ALaunchedWorldOfOneIsAWorldOfOneRank) {
  // Not the engine's default of 3: one launched process is one rank.
  absl::StatusOr<ResolvedBackend> b = registry_.Resolve(
      BackendChoice{"threads", 0}, LaunchedBy("torchrun", 1, 0));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->world_size, 1);
  b = registry_.Resolve(BackendChoice{"auto", 0}, LaunchedBy("OpenMPI", 1, 0));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->world_size, 1);
  // Another size is refused, naming the launcher.
  b = registry_.Resolve(BackendChoice{"threads", 3},
                        LaunchedBy("torchrun", 1, 0));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("--world_size=3: this process was started by torchrun "
                        "as a world of 1 process, so it trains as 1 rank"));
  // Without a launcher the default stays.
  b = registry_.Resolve(BackendChoice{"threads", 0}, LaunchContext{});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->world_size, 3);
}

TEST_F(RegistryTest, AnEngineThatJoinsTakesTheLaunchedWorld) {
  absl::StatusOr<ResolvedBackend> b =
      registry_.Resolve(BackendChoice{"procs", 0}, LaunchedBy("OpenMPI", 4, 1));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->world_size, 4);
}

TEST_F(RegistryTest, RunPassesTheOptionsAndReturnsTheMostTellingError) {
  ASSERT_TRUE(registry_
                  .Run({"threads", 2}, WithTimeout(absl::Seconds(7)),
                       [](comm::Communicator&) { return absl::OkStatus(); })
                  .ok());
  EXPECT_EQ(seen_.runs, 1);
  EXPECT_EQ(seen_.world_size, 2);
  EXPECT_EQ(seen_.timeout, absl::Seconds(7));
  EXPECT_TRUE(seen_.errors.empty());

  Seen failing_seen;
  LaunchRegistry failing;
  ASSERT_TRUE(
      failing
          .Add(FakeEngine("f", &failing_seen, true, 0, false,
                          {absl::AbortedError("peer failed"), absl::OkStatus(),
                           absl::InternalError("nan loss")}))
          .ok());
  absl::Status s = failing.Run(
      {"f", 3}, {}, [](comm::Communicator&) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "rank 2: nan loss");
  EXPECT_THAT(failing_seen.errors, ::testing::ElementsAre(0, 2));
}

TEST_F(RegistryTest, RunRefusesABadTimeoutAnUnknownEngineAndWhatCannotRun) {
  auto noop = [](comm::Communicator&) { return absl::OkStatus(); };
  EXPECT_THAT(
      std::string(
          registry_.Run({"threads", 2}, WithTimeout(absl::ZeroDuration()), noop)
              .message()),
      HasSubstr("it must be positive"));
  EXPECT_EQ(registry_.Run({"nope", 2}, {}, noop).code(),
            absl::StatusCode::kInvalidArgument);
  Seen refused_seen;
  LaunchRegistry refusing;
  ASSERT_TRUE(refusing
                  .Add(FakeEngine("r", &refused_seen, true, 0, false,
                                  {absl::OkStatus()},
                                  absl::FailedPreconditionError("no GPU")))
                  .ok());
  EXPECT_EQ(refusing.Run({"r", 1}, {}, noop).message(), "no GPU");
  EXPECT_EQ(refused_seen.runs, 0);
  EXPECT_EQ(seen_.runs, 0);
}

}  // namespace
}  // namespace tandem::train
