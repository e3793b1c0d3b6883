#include "train/examples/example_main.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
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

absl::Status Usage(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, "; see --help for the flags"));
}

// "--name=value", "-name", "--noname" -> name and value; false when `arg` is
// not a flag.
bool SplitFlag(absl::string_view arg, absl::string_view& name,
               absl::string_view& value, bool& has_value) {
  if (!absl::ConsumePrefix(&arg, "-")) return false;
  absl::ConsumePrefix(&arg, "-");
  const size_t eq = arg.find('=');
  has_value = eq != absl::string_view::npos;
  name = arg.substr(0, eq);
  value = has_value ? arg.substr(eq + 1) : absl::string_view();
  return !name.empty();
}

// The flags of the examples and of this runner; absl's own (--flagfile,
// --fromenv, --version...) are not handled here, so they count as unknown
// rather than being accepted and ignored.
bool IsExampleFlag(const absl::CommandLineFlag& flag) {
  return absl::StrContains(flag.Filename(), "train/examples/");
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
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-help" || arg == "-h") {
      return ParsedCommandLine::kHelp;
    }
    absl::string_view name, value;
    bool has_value = false;
    if (arg == "--" || !SplitFlag(arg, name, value, has_value)) {
      return Usage(absl::StrCat("unexpected argument '", arg,
                                "': this program takes no positional "
                                "arguments, only flags (--name=value)"));
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string bool_value;
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && !flag->IsOfType<bool>()) flag = nullptr;
      bool_value = "false";
    } else if (flag != nullptr && !has_value && flag->IsOfType<bool>()) {
      bool_value = "true";
    }
    if (flag == nullptr || flag->IsRetired() || !IsExampleFlag(*flag)) {
      return Usage(absl::StrCat("unknown flag '", arg, "'"));
    }
    if (!bool_value.empty()) {
      value = bool_value;
    } else if (!has_value) {
      if (i + 1 == args.size()) {
        return Usage(absl::StrCat("flag '", arg, "' needs a value"));
      }
      value = args[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return Usage(absl::StrCat("bad value '", value, "' for --", flag->Name(),
                                ": ", error));
    }
  }
  return ParsedCommandLine::kRun;
}

std::string ExampleHelp(const ExampleSpec& spec) {
  std::string help = absl::StrCat(
      spec.name, ": ", spec.summary, "\n\nExit codes: 0 success, 1 runtime ",
      "error (a rank failed), 2 usage error (bad flag or a backend that ",
      "cannot run here).\n\nFlags (--name=value):\n");
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsExampleFlag(*flag)) {
      flags.push_back(flag);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  for (const absl::CommandLineFlag* flag : flags) {
    const std::string text = flag->Name() == "backend"
                                 ? BuiltinEngines().BackendHelp()
                                 : flag->Help();
    absl::StrAppend(&help, "  --", flag->Name(), "  ", text,
                    " (default: ", flag->DefaultValue(), ")\n");
  }
  return help;
}

int ExampleMain(int argc, char** argv, const ExampleSpec& spec,
                const ExampleSetup& setup) {
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  auto fail = [&spec](int code, const absl::Status& status) {
    std::fprintf(stderr, "%s: %s\n", spec.name.c_str(),
                 code == kExitUsageError ? std::string(status.message()).c_str()
                                         : status.ToString().c_str());
    return code;
  };
  absl::StatusOr<ParsedCommandLine> parsed = ParseExampleFlags(args);
  if (!parsed.ok()) return fail(kExitUsageError, parsed.status());
  if (*parsed == ParsedCommandLine::kHelp) {
    std::fputs(ExampleHelp(spec).c_str(), stdout);
    return kExitOk;
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

}  // namespace tandem::train
