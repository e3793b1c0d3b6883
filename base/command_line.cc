#include "base/command_line.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace tandem {
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

// A flag of the program's own folders; absl's own (--flagfile, --fromenv,
// --version...) are not handled here, so they count as unknown rather than
// being accepted and ignored.
bool IsOwnFlag(const absl::CommandLineFlag& flag,
               const std::vector<std::string>& flag_folders) {
  return std::any_of(flag_folders.begin(), flag_folders.end(),
                     [&flag](const std::string& folder) {
                       return absl::StrContains(flag.Filename(), folder);
                     });
}

}  // namespace

absl::StatusOr<ParsedCommandLine> ParseFlags(
    const std::vector<std::string>& args,
    const std::vector<std::string>& flag_folders) {
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
    if (flag == nullptr || flag->IsRetired() ||
        !IsOwnFlag(*flag, flag_folders)) {
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

std::string CommandLineHelp(const CommandLine& command_line) {
  std::string help =
      absl::StrCat(command_line.program, ": ", command_line.summary, "\n\n",
                   command_line.exit_codes, "\n\nFlags (--name=value):\n");
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!flag->IsRetired() && IsOwnFlag(*flag, command_line.flag_folders)) {
      flags.push_back(flag);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  for (const absl::CommandLineFlag* flag : flags) {
    const auto it = command_line.help_overrides.find(std::string(flag->Name()));
    const std::string text =
        it != command_line.help_overrides.end() ? it->second : flag->Help();
    absl::StrAppend(&help, "  --", flag->Name(), "  ", text,
                    " (default: ", flag->DefaultValue(), ")\n");
  }
  if (!command_line.help_epilogue.empty()) {
    absl::StrAppend(&help, "\n", command_line.help_epilogue);
    if (!absl::EndsWith(help, "\n")) help += '\n';
  }
  return help;
}

std::optional<int> HandleCommandLine(const CommandLine& command_line, int argc,
                                     char** argv) {
  const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  absl::StatusOr<ParsedCommandLine> parsed =
      ParseFlags(args, command_line.flag_folders);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s\n", command_line.program.c_str(),
                 std::string(parsed.status().message()).c_str());
    return kExitUsageError;
  }
  if (*parsed == ParsedCommandLine::kHelp) {
    std::fputs(CommandLineHelp(command_line).c_str(), stdout);
    return kExitOk;
  }
  return std::nullopt;
}

}  // namespace tandem
