// tandemrun: torchrun for tandem. Starts --nproc_per_node workers on this
// node with torchrun's environment, hosts the TCP store on node 0, forwards
// SIGINT/SIGTERM/SIGHUP to the workers, stops every worker when one fails
// and prints torchrun's ChildFailedError-style report; --max_restarts=K
// restarts the whole group up to K times first.
//
//   tandemrun --nproc_per_node=2 -- bazel-bin/train/toy_ddp --backend=gloo
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "train/launch/worker_group.h"

ABSL_FLAG(int, nproc_per_node, 1, "Workers to start on this node.");
ABSL_FLAG(int, nnodes, 1, "Nodes in the job (one tandemrun per node).");
ABSL_FLAG(int, node_rank, 0,
          "This node's index in [0, --nnodes); node 0 hosts the TCP store.");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "Address of node 0, where the TCP store listens (MASTER_ADDR).");
ABSL_FLAG(int, master_port, 29500,
          "Port of the TCP store (MASTER_PORT); 0 picks a free one "
          "(single node only).");
ABSL_FLAG(int, max_restarts, 0,
          "Restart all workers up to this many times after a failure.");

namespace {

int signal_pipe_write = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (write(signal_pipe_write, &byte, 1) < 0) {
    // Nothing to do in a handler; the workers will be stopped on exit.
  }
  errno = saved;
}

// The launcher's work; main adds the checks of its own output.
int Run(int argc, char** argv) {
  // Flags end at "--" or at the first word that is not a flag: the program.
  std::vector<std::string> flags;
  std::vector<std::string> command;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    flags.push_back(arg);
  }
  for (; i < argc; ++i) command.push_back(argv[i]);
  std::vector<char*> flag_argv = {argv[0]};
  for (std::string& f : flags) flag_argv.push_back(f.data());
  const tandem::CommandLine command_line = {
      .program = "tandemrun",
      .summary =
          "Starts --nproc_per_node workers with torchrun's environment (RANK, "
          "LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, "
          "MASTER_PORT), hosts the TCP store on node 0, stops all workers "
          "when one fails and reports it. Usage: tandemrun [FLAGS] -- "
          "PROGRAM [ARGS...] (flags in --name=value form).",
      .flag_folders = {"train/launch/"},
      .exit_codes =
          "Exit codes: 0 every worker succeeded, 1 a worker failed "
          "(after --max_restarts), 2 usage error, 128+N stopped "
          "by signal N.",
  };
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          command_line, static_cast<int>(flag_argv.size()), flag_argv.data())) {
    return *exit_code;
  }
  tandem::train::WorkerGroupOptions options;
  options.command = command;
  options.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::cerr << "tandemrun: pipe() failed\n";
    return tandem::kExitRuntimeError;
  }
  signal_pipe_write = fds[1];
  options.signal_fd = fds[0];
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);

  absl::StatusOr<tandem::train::WorkerGroupResult> result =
      tandem::train::RunWorkerGroup(options);
  if (!result.ok()) {
    std::cerr << result.status().message() << "\n";
    return absl::IsInvalidArgument(result.status()) ? tandem::kExitUsageError
                                                    : tandem::kExitRuntimeError;
  }
  if (result->failure) {
    std::cerr << tandem::train::FailureReport(command[0], *result->failure);
  } else if (result->remote_failure) {
    std::cerr << "tandemrun: this node's workers were stopped because "
              << *result->remote_failure
              << " (that node's tandemrun has the report)\n";
  }
  return result->exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("tandemrun")) {
    return *code;
  }
  // The workers share our stdout; their stderr comes through us. Lost
  // output (a full disk, /dev/full) fails the job.
  return tandem::base::FinishStdStreams("tandemrun", Run(argc, argv));
}
