// A program's command line: flags only, parsed over absl's flag registry, with
// the exit codes of Python's argparse. A main is a few lines:
//
//   ABSL_FLAG(int64_t, size, -1, "Number of samples.");
//   int main(int argc, char** argv) {
//     const tandem::CommandLine command_line = {
//         .program = "sampler", .summary = "Prints ...",
//         .flag_folders = {"train/data/"}};
//     if (std::optional<int> exit_code =
//             tandem::HandleCommandLine(command_line, argc, argv)) {
//       return *exit_code;  // 0 after --help, 2 after a usage error
//     }
//     ...  // flag checks (exit 2), then the work (exit 1 on a failure)
//   }
//
// Flags are --name=value, --name value, --bool_flag or --nobool_flag (one or
// two dashes), for flags defined in files under the program's own folders only
// (absl's --flagfile, --fromenv or --helpfull are unknown, never silently
// accepted); --help (or -h) prints the program's flags. Positional arguments
// (and "--"), an unknown flag, a missing or bad value are usage errors.
// absl::ParseCommandLine is not used: it exits 1 on an unknown flag or a bad
// value, where a usage error is 2.
#ifndef TANDEM_BASE_COMMAND_LINE_H_
#define TANDEM_BASE_COMMAND_LINE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

// Exit codes, as Python's argparse.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

struct CommandLine {
  std::string program = {};  // the first word of every message: "sampler"
  std::string summary = {};  // what the program does, for --help
  // Source folders whose flags the program owns ("bench/", "train/data/"): a
  // flag counts when the file that defines it has one of them in its path.
  std::vector<std::string> flag_folders = {};
  // --help's line on exit codes.
  std::string exit_codes =
      "Exit codes: 0 success, 1 runtime error, 2 usage error (bad flag).";
  // Flag name -> the help --help prints instead of the flag's own.
  std::map<std::string, std::string> help_overrides = {};
  // Appended to --help after the flags (examples, notes); may be empty.
  std::string help_epilogue = {};
};

// What ParseFlags found.
enum class ParsedCommandLine { kRun, kHelp };

// Sets the registered absl flags defined under `flag_folders` from `args` (the
// command line without the program name). InvalidArgument naming the argument
// for a positional argument, an unknown flag, a missing or bad value; kHelp
// for --help, -help or -h.
absl::StatusOr<ParsedCommandLine> ParseFlags(
    const std::vector<std::string>& args,
    const std::vector<std::string>& flag_folders);

// The --help text: "<program>: <summary>", the exit codes, then every flag of
// the program's folders by name with its help and default, then the epilogue.
std::string CommandLineHelp(const CommandLine& command_line);

// Parses argv (argv[0] is the program). nullopt: run the program. Otherwise
// the exit code main returns: kExitOk after printing --help to stdout,
// kExitUsageError after printing "<program>: <message>" to stderr.
std::optional<int> HandleCommandLine(const CommandLine& command_line, int argc,
                                     char** argv);

}  // namespace tandem

#endif  // TANDEM_BASE_COMMAND_LINE_H_
