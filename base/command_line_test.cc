#include "base/command_line.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int64_t, cl_count, 3, "A count.");
ABSL_FLAG(bool, cl_verbose, false, "A boolean flag.");
ABSL_FLAG(double, cl_seconds, 1.5, "Seconds.");

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kOwn = {"base/"};

std::string Error(const std::vector<std::string>& args,
                  const std::vector<std::string>& folders = kOwn) {
  absl::StatusOr<ParsedCommandLine> parsed = ParseFlags(args, folders);
  if (parsed.ok()) return "ok";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

TEST(ParseFlagsTest, SetsFlagsInEveryForm) {
  ASSERT_EQ(Error({"--cl_count=7", "--cl_verbose", "--cl_seconds", "2"}), "ok");
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_count), 7);
  EXPECT_TRUE(absl::GetFlag(FLAGS_cl_verbose));
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_seconds), 2.0);
  ASSERT_EQ(Error({"-cl_count", "9", "--nocl_verbose"}), "ok");
  EXPECT_EQ(absl::GetFlag(FLAGS_cl_count), 9);
  EXPECT_FALSE(absl::GetFlag(FLAGS_cl_verbose));
  ASSERT_EQ(Error({"--cl_verbose=true"}), "ok");
  EXPECT_TRUE(absl::GetFlag(FLAGS_cl_verbose));
  EXPECT_EQ(Error({}), "ok");
}

TEST(ParseFlagsTest, PositionalArgumentsAreUsageErrors) {
  EXPECT_THAT(Error({"--cl_count=2", "extra"}),
              HasSubstr("unexpected argument 'extra': this program takes no "
                        "positional arguments"));
  EXPECT_THAT(Error({"--", "--cl_count=2"}),
              HasSubstr("unexpected argument '--'"));
  EXPECT_THAT(Error({"-"}), HasSubstr("unexpected argument '-'"));
}

TEST(ParseFlagsTest, UnknownFlagsAndBadValuesAreUsageErrors) {
  EXPECT_EQ(Error({"--cl_cuont=3"}),
            "unknown flag '--cl_cuont=3'; see --help for the flags");
  EXPECT_THAT(Error({"--nocl_count"}), HasSubstr("unknown flag"));
  // absl's own flags would be accepted by absl and do nothing here.
  EXPECT_THAT(Error({"--flagfile=flags.txt"}), HasSubstr("unknown flag"));
  EXPECT_THAT(Error({"--fromenv=cl_count"}), HasSubstr("unknown flag"));
  EXPECT_THAT(Error({"--cl_count=three"}),
              HasSubstr("bad value 'three' for --cl_count"));
  EXPECT_THAT(Error({"--cl_count=inf"}),
              HasSubstr("bad value 'inf' for --cl_count"));
  EXPECT_THAT(Error({"--cl_count"}),
              HasSubstr("flag '--cl_count' needs a value"));
}

TEST(ParseFlagsTest, OnlyTheProgramsFoldersCount) {
  EXPECT_THAT(Error({"--cl_count=1"}, {"bench/"}),
              HasSubstr("unknown flag '--cl_count=1'"));
  EXPECT_EQ(Error({"--cl_count=1"}, {"bench/", "base/"}), "ok");
}

TEST(ParseFlagsTest, HelpIsRecognised) {
  for (const char* help : {"--help", "-h", "-help"}) {
    absl::StatusOr<ParsedCommandLine> parsed =
        ParseFlags({"--cl_count=1", help}, kOwn);
    ASSERT_TRUE(parsed.ok()) << help;
    EXPECT_EQ(*parsed, ParsedCommandLine::kHelp);
  }
}

TEST(CommandLineHelpTest, ListsOwnFlagsOverridesAndEpilogue) {
  const std::string help =
      CommandLineHelp({.program = "demo",
                       .summary = "a demonstration.",
                       .flag_folders = kOwn,
                       .help_overrides = {{"cl_seconds", "Generated help."}},
                       .help_epilogue = "Example: demo --cl_count=2"});
  EXPECT_THAT(help, HasSubstr("demo: a demonstration."));
  EXPECT_THAT(help, HasSubstr("Exit codes: 0 success, 1 runtime error, 2 "
                              "usage error"));
  EXPECT_THAT(help, HasSubstr("--cl_count  A count. (default: 3)"));
  EXPECT_THAT(help, HasSubstr("--cl_seconds  Generated help. (default: 1.5)"));
  EXPECT_THAT(help, Not(HasSubstr("Seconds.")));
  EXPECT_THAT(help, Not(HasSubstr("--flagfile")));
  EXPECT_THAT(help, HasSubstr("\nExample: demo --cl_count=2\n"));
}

std::optional<int> Handle(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return HandleCommandLine(
      {.program = "demo", .summary = "a demonstration.", .flag_folders = kOwn},
      static_cast<int>(argv.size()), argv.data());
}

TEST(HandleCommandLineTest, RunHelpOrUsageError) {
  EXPECT_EQ(Handle({"demo", "--cl_count=4"}), std::nullopt);
  EXPECT_EQ(Handle({"demo"}), std::nullopt);

  testing::internal::CaptureStdout();
  EXPECT_EQ(Handle({"demo", "--help"}), kExitOk);
  EXPECT_THAT(testing::internal::GetCapturedStdout(),
              HasSubstr("--cl_count  A count."));

  testing::internal::CaptureStderr();
  EXPECT_EQ(Handle({"demo", "--cl_count=abc"}), kExitUsageError);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "demo: bad value 'abc' for --cl_count: Illegal value 'abc' "
            "specified for flag 'cl_count'; see --help for the flags\n");

  testing::internal::CaptureStderr();
  EXPECT_EQ(Handle({"demo", "extra"}), kExitUsageError);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("demo: unexpected argument 'extra'"));
}

}  // namespace
}  // namespace tandem
