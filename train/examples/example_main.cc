#include "train/examples/example_main.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "train/launch/backend.h"
#include "train/launch/builtin_engines.h"

// The help of --backend is generated from the registry (ExampleHelp).
ABSL_FLAG(std::string, backend, "auto", "see --help");
ABSL_FLAG(int, world_size, 0,
          "Number of ranks; 0: the MPI job's size, the number of GPUs if "
          "there are any, else 2 simulated ranks.");
ABSL_FLAG(double, timeout, 300,
          "Seconds every collective may take before the job fails and names "
          "the ranks that never arrived; > 0 and finite.");

namespace tandem::train {
namespace {

// The flags of the examples and of this runner (absl's own are unknown).
const std::vector<std::string>& ExampleFolders() {
  static const auto* const folders =
      new std::vector<std::string>{"train/examples/"};
  return *folders;
}

CommandLine ExampleCommandLine(const ExampleSpec& spec) {
  return {.program = spec.name,
          .summary = spec.summary,
          .flag_folders = ExampleFolders(),
          .exit_codes =
              "Exit codes: 0 success, 1 runtime error (a rank "
              "failed), 2 usage error (bad flag or a backend that "
              "cannot run here).",
          .help_overrides = {{"backend", BuiltinEngines().BackendHelp()}}};
}

}  // namespace

absl::StatusOr<absl::Duration> TimeoutFromSeconds(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout=", seconds,
                     "; expected seconds > 0 and finite (e.g. --timeout=300)"));
  }
  return absl::Seconds(seconds);
}

absl::StatusOr<ParsedCommandLine> ParseExampleFlags(
    const std::vector<std::string>& args) {
  return ParseFlags(args, ExampleFolders());
}

std::string ExampleHelp(const ExampleSpec& spec) {
  return CommandLineHelp(ExampleCommandLine(spec));
}

int ExampleMain(int argc, char** argv, const ExampleSpec& spec,
                const ExampleSetup& setup) {
  auto fail = [&spec](int code, const absl::Status& status) {
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(),
                 code == kExitUsageError ? std::string(status.message()).c_str()
                                         : status.ToString().c_str());
    return code;
  };
  if (std::optional<int> exit_code =
          HandleCommandLine(ExampleCommandLine(spec), argc, argv)) {
    return *exit_code;
  }
  absl::StatusOr<absl::Duration> timeout =
      TimeoutFromSeconds(absl::GetFlag(FLAGS_timeout));
  if (!timeout.ok()) return fail(kExitUsageError, timeout.status());
  absl::StatusOr<ExampleRank> rank_main = setup();
  if (!rank_main.ok()) return fail(kExitUsageError, rank_main.status());
  absl::StatusOr<ResolvedBackend> backend =
      ResolveBackend({.backend = absl::GetFlag(FLAGS_backend),
                      .world_size = absl::GetFlag(FLAGS_world_size)});
  if (!backend.ok()) return fail(kExitUsageError, backend.status());

  RunOptions options;
  options.timeout = *timeout;
  // A note well before the timeout, and at least every 30 s.
  options.stall_note_interval = std::min(absl::Seconds(30), *timeout / 10);
  const absl::Status status = RunOnBackend(
      *backend,
      [&rank_main](comm::Communicator& comm) {
        return (*rank_main)(comm, DeviceFor(comm));
      },
      options);
  if (!status.ok()) return fail(kExitRuntimeError, status);
  return kExitOk;
}

absl::StatusOr<std::optional<DType>> ParseAmpFlag(const std::string& value) {
  if (value == "bf16") return std::optional<DType>(DType::kBF16);
  if (value == "f16") return std::optional<DType>(DType::kF16);
  if (value == "off") return std::optional<DType>();
  return absl::InvalidArgumentError(
      absl::StrCat("--amp=", value, "; expected bf16, f16 or off"));
}

}  // namespace tandem::train
