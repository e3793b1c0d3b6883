#include "train/launch/worker_group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class WorkerGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::filesystem::path(tmp ? tmp : "/tmp") /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    setenv("DIR", dir_.c_str(), 1);
  }

  // Options running `script` under /bin/sh in every worker ($DIR is the
  // test's folder).
  WorkerGroupOptions Shell(const std::string& script, int n) {
    WorkerGroupOptions o;
    o.command = {"/bin/sh", "-c", script};
    o.nproc_per_node = n;
    o.master_port = 0;
    o.stop_grace = absl::Seconds(2);
    return o;
  }

  std::string Read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::filesystem::path dir_;
};

TEST_F(WorkerGroupTest, WorkersGetTorchrunsEnvironment) {
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(
      Shell("echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE "
            "$GROUP_RANK $MASTER_ADDR $MASTER_PORT $TORCHELASTIC_RESTART_COUNT "
            "$TORCHELASTIC_USE_AGENT_STORE\" > $DIR/w$RANK",
            3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_FALSE(r->failure.has_value());
  ASSERT_GT(r->master_port, 0);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(Read(absl::StrCat("w", rank)),
              absl::StrCat(rank, " ", rank, " 3 3 0 127.0.0.1 ", r->master_port,
                           " 0 True\n"));
  }
}

// A port nobody listens on now (the kernel's pick, released at once).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Runs `nodes` as the nodes of one job (each its own agent, in a thread of
// this process, as tandemrun on each machine would be).
std::vector<absl::StatusOr<WorkerGroupResult>> RunNodes(
    std::vector<WorkerGroupOptions> nodes) {
  const int port = FreePort();
  std::vector<absl::StatusOr<WorkerGroupResult>> results(
      nodes.size(), absl::UnknownError("not run"));
  std::vector<std::thread> agents;
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].nnodes = static_cast<int>(nodes.size());
    nodes[i].node_rank = static_cast<int>(i);
    nodes[i].master_port = port;
    nodes[i].agent_timeout = absl::Seconds(30);
    agents.emplace_back(
        [&results, &nodes, i] { results[i] = RunWorkerGroup(nodes[i]); });
  }
  for (std::thread& t : agents) t.join();
  return results;
}

// Sends SIGTERM down `fd` (a tandemrun's signal pipe) once ranks
// 0..ranks-1 have each created `dir`/ready<RANK>.
std::thread SignalWhenReady(const std::filesystem::path& dir, int ranks,
                            int fd) {
  return std::thread([dir, ranks, fd] {
    for (int rank = 0; rank < ranks; ++rank) {
      while (!std::filesystem::exists(dir / absl::StrCat("ready", rank))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    const unsigned char sig = SIGTERM;
    ASSERT_EQ(write(fd, &sig, 1), 1);
  });
}

TEST_F(WorkerGroupTest, TwoNodesGiveEveryRankItsPlace) {
  WorkerGroupOptions o = Shell(
      "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $GROUP_RANK "
      "${TORCHELASTIC_USE_AGENT_STORE:-none}\" > $DIR/w$RANK",
      2);
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, o});
  for (const auto& node : r) {
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_EQ(node->exit_code, 0);
  }
  EXPECT_EQ(Read("w0"), "0 0 4 0 True\n");
  EXPECT_EQ(Read("w1"), "1 1 4 0 True\n");
  EXPECT_EQ(Read("w2"), "2 0 4 1 True\n");
  EXPECT_EQ(Read("w3"), "3 1 4 1 True\n");
}

TEST_F(WorkerGroupTest, AFailureOnOneNodeRestartsEveryNode) {
  // Rank 3 (node 1) fails in attempt 0 while every other rank would sleep
  // for 60 s: node 0 must stop its workers and restart with node 1. Rank 3
  // fails only once ranks 0-2 have recorded attempt 0 (at most 30 s), so a
  // loaded machine cannot stop a worker before it wrote its line.
  WorkerGroupOptions o = Shell(
      "echo $TORCHELASTIC_RESTART_COUNT >> $DIR/attempts$RANK; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then "
      "  if [ $RANK = 3 ]; then "
      "    for i in $(seq 3000); do "
      "      [ -s $DIR/attempts0 ] && [ -s $DIR/attempts1 ] && "
      "      [ -s $DIR/attempts2 ] && break; sleep 0.01; done; "
      "    exit 4; fi; "
      "  exec sleep 60; fi",
      2);
  o.max_restarts = 1;
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, o});
  for (const auto& node : r) {
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_EQ(node->exit_code, 0);
    EXPECT_EQ(node->restarts, 1);
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Read(absl::StrCat("attempts", rank)), "0\n1\n") << rank;
  }
}

TEST_F(WorkerGroupTest, EveryNodeGivesUpTogetherAndNamesTheCause) {
  WorkerGroupOptions o =
      Shell("if [ $RANK = 0 ]; then exit 9; fi; exec sleep 60", 2);
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, o});
  ASSERT_TRUE(r[0].ok()) << r[0].status();
  ASSERT_TRUE(r[1].ok()) << r[1].status();
  EXPECT_EQ(r[0]->exit_code, 1);
  ASSERT_TRUE(r[0]->failure.has_value());
  EXPECT_EQ(r[0]->failure->exit_code, 9);
  EXPECT_EQ(r[1]->exit_code, 1);
  EXPECT_FALSE(r[1]->failure.has_value());
  EXPECT_EQ(r[1]->remote_failure, "node 0: rank 0 failed (exit code 9)");
}

// A signal forwarded to one node's tandemrun (a preemption) ends the job on
// every node: the others stop their workers and do not restart, although
// they have restarts left, and say which node stopped.
TEST_F(WorkerGroupTest, ASignalOnOneNodeStopsEveryNodeWithoutRestarting) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  WorkerGroupOptions o = Shell(
      "echo $TORCHELASTIC_RESTART_COUNT >> $DIR/attempts$RANK; "
      "touch $DIR/ready$RANK; exec sleep 60",
      2);
  o.max_restarts = 3;
  WorkerGroupOptions signalled = o;
  signalled.signal_fd = fds[0];
  std::thread signaller = SignalWhenReady(dir_, 4, fds[1]);
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, signalled});
  signaller.join();
  close(fds[0]);
  close(fds[1]);
  ASSERT_TRUE(r[0].ok()) << r[0].status();
  ASSERT_TRUE(r[1].ok()) << r[1].status();
  EXPECT_EQ(r[1]->exit_code, 128 + SIGTERM);
  EXPECT_EQ(r[0]->exit_code, 1);
  EXPECT_EQ(r[0]->restarts, 0);
  // Node 0 ended because node 1 said it was stopped, not by the agents'
  // timeout (that would be a timeout naming the missing node): the reason
  // is the proof, so no measured time is asserted.
  EXPECT_EQ(r[0]->stopped, "node 1: tandemrun stopped by signal 15");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Read(absl::StrCat("attempts", rank)), "0\n") << rank;
  }
}

// torchrun's --rdzv_id: nodes of different jobs refuse each other.
TEST_F(WorkerGroupTest, NodesWithDifferentJobIdsAreRefused) {
  WorkerGroupOptions o = Shell("true", 1);
  o.rdzv_id = "job-a";
  WorkerGroupOptions other = o;
  other.rdzv_id = "job-b";
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, other});
  EXPECT_EQ(r[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r[1].status().message(), HasSubstr("--rdzv_id=job-b"));
  EXPECT_THAT(r[1].status().message(), HasSubstr("--rdzv_id=job-a"));
}

// Issue 25: a node size no machine's open-file limit holds is refused in
// one line, before any allocation or worker (it aborted in bad_alloc).
TEST_F(WorkerGroupTest, ASizeThisMachineCannotRunIsRefused) {
  WorkerGroupOptions o = Shell("true", 2147483647);
  absl::Status s = CheckWorkerGroupOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("--nproc_per_node=2147483647 cannot run here: each "
                        "worker needs a file descriptor"));
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  o = Shell("true", 2);
  o.nnodes = 2147483647;
  o.master_port = 29500;
  EXPECT_THAT(CheckWorkerGroupOptions(o).message(),
              HasSubstr("ranks do not fit WORLD_SIZE"));
  EXPECT_TRUE(CheckWorkerGroupOptions(Shell("true", 2)).ok());
}

TEST_F(WorkerGroupTest, NodesWithDifferentFlagsAreRefused) {
  WorkerGroupOptions o = Shell("true", 2);
  WorkerGroupOptions other = o;
  other.max_restarts = 3;
  std::vector<absl::StatusOr<WorkerGroupResult>> r = RunNodes({o, other});
  EXPECT_EQ(r[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r[1].status().message(),
              HasSubstr("node 0 runs with '--nnodes=2 --nproc_per_node=2 "
                        "--max_restarts=0' but node 1 with '--nnodes=2 "
                        "--nproc_per_node=2 --max_restarts=3'"));
  EXPECT_EQ(r[0].status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(WorkerGroupTest, AFailureStopsTheOthersAndIsReported) {
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(Shell(
      "if [ $RANK = 1 ]; then for i in $(seq 1 12); do echo line$i >&2; done; "
      "printf unfinished >&2; exit 3; fi; exec sleep 120",
      3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 1);
  EXPECT_EQ(r->failure->exit_code, 3);
  EXPECT_EQ(r->failure->signal, 0);
  ASSERT_EQ(r->failure->stderr_tail.size(), 10u);
  EXPECT_EQ(r->failure->stderr_tail.front(), "line4");
  EXPECT_EQ(r->failure->stderr_tail.back(), "unfinished");
  const std::string report = FailureReport("worker.sh", *r->failure);
  EXPECT_THAT(report, HasSubstr("worker.sh FAILED"));
  EXPECT_THAT(report, HasSubstr("rank      : 1 (local_rank: 1)"));
  EXPECT_THAT(report, HasSubstr("exitcode  : 3 (pid: "));
  EXPECT_THAT(report, HasSubstr("    line12\n    unfinished\n"));
}

// Issue 39: rank 1 stopped (SIGSTOP) makes rank 0 time out; the report names
// rank 1 as what could not run, not only rank 0 as the first failure.
TEST_F(WorkerGroupTest, AStoppedPeerIsNamedBesideTheFailure) {
  WorkerGroupOptions o =
      Shell("if [ $RANK = 1 ]; then kill -STOP $$; fi; sleep 1; exit 1", 2);
  o.stop_grace = absl::Milliseconds(200);
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 0);
  ASSERT_EQ(r->failure->peers_not_running.size(), 1u);
  EXPECT_THAT(r->failure->peers_not_running[0],
              HasSubstr("rank 1 (local_rank: 1, pid: "));
  EXPECT_THAT(r->failure->peers_not_running[0],
              HasSubstr("): stopped (SIGSTOP or SIGTSTP"));
  EXPECT_THAT(FailureReport("w", *r->failure),
              HasSubstr("Ranks that could not run when it failed"));
}

TEST_F(WorkerGroupTest, AKilledWorkerIsReportedWithItsSignal) {
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(
      Shell("if [ $RANK = 0 ]; then kill -9 $$; fi; exec sleep 120", 2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  ASSERT_TRUE(r->failure.has_value());
  EXPECT_EQ(r->failure->rank, 0);
  EXPECT_EQ(r->failure->signal, SIGKILL);
  EXPECT_THAT(FailureReport("w", *r->failure),
              HasSubstr("exitcode  : -9 (signal 9: Killed)"));
}

TEST_F(WorkerGroupTest, AWorkerIgnoringSigtermIsKilled) {
  WorkerGroupOptions o = Shell(
      "if [ $RANK = 0 ]; then exit 5; fi; trap '' TERM; exec sleep 120", 2);
  o.stop_grace = absl::Milliseconds(200);
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->failure->exit_code, 5);
}

TEST_F(WorkerGroupTest, RestartsAfterAFailure) {
  WorkerGroupOptions o = Shell(
      "echo $TORCHELASTIC_RESTART_COUNT >> $DIR/attempts$RANK; "
      "if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 4; "
      "fi",
      2);
  o.max_restarts = 1;
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->restarts, 1);
  EXPECT_FALSE(r->failure.has_value());
  EXPECT_EQ(Read("attempts1"), "0\n1\n");
}

TEST_F(WorkerGroupTest, GivesUpAfterMaxRestarts) {
  WorkerGroupOptions o = Shell(
      "echo $TORCHELASTIC_RESTART_COUNT >> $DIR/attempts$RANK; exit 7", 1);
  o.max_restarts = 2;
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->restarts, 2);
  EXPECT_EQ(r->failure->exit_code, 7);
  EXPECT_EQ(Read("attempts0"), "0\n1\n2\n");
}

TEST_F(WorkerGroupTest, ForwardsSignals) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  WorkerGroupOptions o = Shell(
      "trap 'echo TERM > $DIR/term$RANK; exit 0' TERM; touch $DIR/ready$RANK; "
      "while true; do sleep 0.05; done",
      2);
  o.signal_fd = fds[0];
  std::thread signaller = SignalWhenReady(dir_, 2, fds[1]);
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  signaller.join();
  close(fds[0]);
  close(fds[1]);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 128 + SIGTERM);
  EXPECT_FALSE(r->failure.has_value());
  EXPECT_EQ(Read("term0"), "TERM\n");
  EXPECT_EQ(Read("term1"), "TERM\n");
}

TEST_F(WorkerGroupTest, AMissingProgramIsAnError) {
  WorkerGroupOptions o;
  o.command = {"/no/such/program"};
  o.master_port = 0;
  absl::StatusOr<WorkerGroupResult> r = RunWorkerGroup(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(),
              HasSubstr("cannot start '/no/such/program' for rank 0"));
}

TEST_F(WorkerGroupTest, BadOptionsAreUsageErrors) {
  WorkerGroupOptions o = Shell("true", 0);
  EXPECT_THAT(RunWorkerGroup(o).status().message(),
              HasSubstr("--nproc_per_node=0"));
  o = Shell("true", 1);
  o.node_rank = 2;
  EXPECT_THAT(RunWorkerGroup(o).status().message(),
              HasSubstr("--node_rank=2 is outside [0, --nnodes=1)"));
  o = Shell("true", 1);
  o.nnodes = 2;
  EXPECT_EQ(RunWorkerGroup(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = WorkerGroupOptions();
  EXPECT_THAT(RunWorkerGroup(o).status().message(),
              HasSubstr("no worker program given"));
}

}  // namespace
}  // namespace tandem::train
