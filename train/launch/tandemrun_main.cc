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

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "comm/nccl/cuda_probe.h"
#include "train/launch/worker_group.h"

ABSL_FLAG(std::string, nproc_per_node, "1",
          "Workers to start on this node: a count, or 'auto' (one per GPU, "
          "else one per CPU, as torchrun), 'gpu' or 'cpu'.");
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
ABSL_FLAG(double, rdzv_timeout, 300,
          "Seconds the nodes wait for each other to join the job (and to "
          "start each attempt) before giving up, naming the missing nodes.");
ABSL_FLAG(std::string, rdzv_endpoint, "",
          "torchrun's HOST[:PORT] of the rendezvous (default port 29400): "
          "the same as --master_addr=HOST --master_port=PORT.");
ABSL_FLAG(std::string, rdzv_id, "",
          "torchrun's job id: every node of a job must give the same one "
          "(nodes of different jobs refuse each other).");
ABSL_FLAG(std::string, rdzv_backend, "static",
          "torchrun's rendezvous backend: 'static' or 'c10d' (both mean "
          "node 0's TCP store here).");
ABSL_FLAG(bool, standalone, false,
          "torchrun's single-node job: --nnodes=1 and a free port "
          "(--master_port=0).");
ABSL_FLAG(std::string, log_dir, "",
          "Refused: tandemrun forwards the workers' stderr line by line and "
          "leaves stdout alone; redirect tandemrun's output instead.");
ABSL_FLAG(std::string, redirects, "", "Refused, as --log_dir.");
ABSL_FLAG(std::string, tee, "", "Refused, as --log_dir.");

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

// torchrun's dash forms: "--nproc-per-node=2" -> "--nproc_per_node=2" (the
// name only, never the value).
std::string Underscored(std::string arg) {
  if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) return arg;
  const size_t end = std::min(arg.find('='), arg.size());
  std::replace(arg.begin() + 2, arg.begin() + static_cast<long>(end), '-', '_');
  return arg;
}

// A usage error: the message and exit code 2.
int Usage(const std::string& message) {
  std::cerr << "tandemrun: " << message << "\n";
  return tandem::kExitUsageError;
}

// --nproc_per_node: a count, or torchrun's 'auto', 'gpu', 'cpu'.
std::optional<int> WorkersPerNode(const std::string& value) {
  const auto cpus = [] {
    return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  };
  const auto gpus = [] {
    absl::StatusOr<tandem::comm::CudaProbe> probe = tandem::comm::ProbeCuda();
    return probe.ok() ? probe->device_count : 0;
  };
  if (value == "cpu") return cpus();
  if (value == "gpu") return gpus() > 0 ? std::optional<int>(gpus()) : 0;
  if (value == "auto") return gpus() > 0 ? gpus() : cpus();
  int n = 0;
  if (!absl::SimpleAtoi(value, &n)) return std::nullopt;
  return n;
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
    flags.push_back(Underscored(arg));
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
  const std::string nproc_flag = absl::GetFlag(FLAGS_nproc_per_node);
  const std::optional<int> nproc = WorkersPerNode(nproc_flag);
  if (!nproc) {
    return Usage("--nproc_per_node='" + nproc_flag +
                 "': expected a count, auto, gpu or cpu");
  }
  if (*nproc == 0 && nproc_flag == "gpu") {
    return Usage("--nproc_per_node=gpu: this machine has no GPU");
  }
  options.nproc_per_node = *nproc;
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.rdzv_id = absl::GetFlag(FLAGS_rdzv_id);
  const std::string endpoint = absl::GetFlag(FLAGS_rdzv_endpoint);
  if (!endpoint.empty()) {
    // torchrun's HOST[:PORT], port 29400 when none is given.
    const size_t colon = endpoint.rfind(':');
    const std::string host = endpoint.substr(0, colon);
    int port = 29400;
    if (host.empty() ||
        (colon != std::string::npos &&
         (!absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 0 ||
          port > 65535))) {
      return Usage("--rdzv_endpoint='" + endpoint +
                   "': expected HOST[:PORT] with PORT in [0, 65535]");
    }
    options.master_addr = host;
    options.master_port = port;
  }
  const std::string backend = absl::GetFlag(FLAGS_rdzv_backend);
  if (backend != "static" && backend != "c10d") {
    return Usage("--rdzv_backend=" + backend +
                 ": tandemrun's rendezvous is node 0's TCP store ('static' "
                 "or 'c10d'); etcd is not supported");
  }
  if (absl::GetFlag(FLAGS_standalone)) {
    if (options.nnodes != 1 || !endpoint.empty()) {
      return Usage(
          "--standalone is a single-node job on a free local port; drop "
          "--nnodes and --rdzv_endpoint, or --standalone");
    }
    options.master_addr = "127.0.0.1";
    options.master_port = 0;
  }
  const double rdzv_timeout = absl::GetFlag(FLAGS_rdzv_timeout);
  if (!(rdzv_timeout > 0) || rdzv_timeout > 86400 * 365) {
    return Usage(absl::StrCat("--rdzv_timeout=", rdzv_timeout,
                              ": expected seconds > 0 (at most a year)"));
  }
  options.rdzv_timeout = absl::Seconds(rdzv_timeout);
  options.stall_note_interval =
      std::min(absl::Seconds(30), options.rdzv_timeout / 10);
  for (const auto& [name, value] :
       {std::pair<std::string, std::string>{"log_dir",
                                            absl::GetFlag(FLAGS_log_dir)},
        {"redirects", absl::GetFlag(FLAGS_redirects)},
        {"tee", absl::GetFlag(FLAGS_tee)}}) {
    if (!value.empty() && value != "0") {
      return Usage(
          "--" + name + "=" + value +
          " is not supported: tandemrun leaves the workers' stdout alone and "
          "forwards their stderr line by line, so redirect tandemrun's own "
          "output (tandemrun ... > out.log 2> err.log) or have each worker "
          "write its own log (RANK is in its environment)");
    }
  }

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
  if (result->signal != 0) {
    std::cerr << "tandemrun: stopped by signal " << result->signal << " ("
              << strsignal(result->signal)
              << "); it was forwarded to the workers' process groups (SIGKILL "
                 "to what was still running after the grace period); exit "
                 "code "
              << result->exit_code << "\n";
  } else if (result->failure) {
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
