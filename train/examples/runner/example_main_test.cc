#include "train/examples/runner/example_main.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_FLAG(int64_t, test_epochs, 3, "Epochs of the test.");
ABSL_FLAG(bool, test_verbose, false, "A boolean flag.");

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedCommandLine> parsed = ParseExampleFlags(args);
  if (parsed.ok()) return "ok";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

TEST(ParseExampleFlagsTest, SetsFlagsInEveryForm) {
  ASSERT_EQ(Error({"--test_epochs=7", "--test_verbose"}), "ok");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_epochs), 7);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_verbose));
  ASSERT_EQ(Error({"-test_epochs", "9", "--notest_verbose"}), "ok");
  EXPECT_EQ(absl::GetFlag(FLAGS_test_epochs), 9);
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_verbose));
  ASSERT_EQ(Error({"--world_size=3", "--backend=sim", "--timeout=1.5"}), "ok");
}

TEST(ParseExampleFlagsTest, PositionalArgumentsAreUsageErrors) {
  EXPECT_THAT(Error({"--test_epochs=2", "extra"}),
              HasSubstr("unexpected argument 'extra': this program takes no "
                        "positional arguments"));
  EXPECT_THAT(Error({"--", "--test_epochs=2"}),
              HasSubstr("unexpected argument '--'"));
  EXPECT_THAT(Error({"-"}), HasSubstr("unexpected argument '-'"));
}

TEST(ParseExampleFlagsTest, UnknownFlagsAndBadValuesAreUsageErrors) {
  EXPECT_EQ(Error({"--epochz=3"}),
            "unknown flag '--epochz=3'; see --help for the flags");
  EXPECT_THAT(Error({"--nottest_epochs"}), HasSubstr("unknown flag"));
  // absl's own flags would be accepted by absl and do nothing here.
  EXPECT_THAT(Error({"--flagfile=flags.txt"}), HasSubstr("unknown flag"));
  EXPECT_THAT(Error({"--fromenv=epochs"}), HasSubstr("unknown flag"));
  EXPECT_THAT(Error({"--notest_epochs"}), HasSubstr("unknown flag"));
  EXPECT_THAT(Error({"--test_epochs=three"}),
              HasSubstr("bad value 'three' for --test_epochs"));
  EXPECT_THAT(Error({"--test_epochs"}),
              HasSubstr("flag '--test_epochs' needs a value"));
}

TEST(ParseExampleFlagsTest, HelpIsRecognised) {
  for (const char* help : {"--help", "-h", "-help"}) {
    absl::StatusOr<ParsedCommandLine> parsed =
        ParseExampleFlags({"--test_epochs=1", help});
    ASSERT_TRUE(parsed.ok()) << help;
    EXPECT_EQ(*parsed, ParsedCommandLine::kHelp);
  }
}

TEST(TimeoutFromSecondsTest, PositiveAndFiniteOnly) {
  EXPECT_EQ(*TimeoutFromSeconds(300), absl::Seconds(300));
  EXPECT_EQ(*TimeoutFromSeconds(0.25), absl::Milliseconds(250));
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    absl::StatusOr<absl::Duration> t = TimeoutFromSeconds(bad);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(t.status().message()),
                HasSubstr("expected seconds > 0 and finite"));
  }
}

struct TestOptions {
  int64_t epochs = 0;
};
struct TestConfig : TestOptions {
  checkpoint::CheckpointOptions checkpoint;
};
absl::StatusOr<TestOptions> TestOptionsFromFlags() {
  if (absl::GetFlag(FLAGS_test_epochs) < 0) {
    return absl::InvalidArgumentError("--test_epochs below 0");
  }
  return TestOptions{absl::GetFlag(FLAGS_test_epochs)};
}

TEST(ConfigFromFlagsTest, OptionsThenCheckpointFlags) {
  ASSERT_EQ(
      Error({"--test_epochs=4", "--checkpoint_dir=ck", "--checkpoint_every=2"}),
      "ok");
  absl::StatusOr<TestConfig> config =
      ConfigFromFlags<TestConfig>(TestOptionsFromFlags);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->epochs, 4);
  EXPECT_EQ(config->checkpoint.dir, "ck");
  EXPECT_EQ(config->checkpoint.every_steps, 2);
  // The options' error comes first, then the checkpoint flags'.
  ASSERT_EQ(Error({"--test_epochs=-1", "--checkpoint_every=-1"}), "ok");
  EXPECT_EQ(ConfigFromFlags<TestConfig>(TestOptionsFromFlags).status(),
            absl::InvalidArgumentError("--test_epochs below 0"));
  ASSERT_EQ(Error({"--test_epochs=1"}), "ok");
  EXPECT_THAT(
      std::string(
          ConfigFromFlags<TestConfig>(TestOptionsFromFlags).status().message()),
      HasSubstr("--checkpoint_every=-1; expected 0"));
  // A config that is the options alone (an example that saves nothing)
  // refuses the checkpoint flags rather than ignore them.
  EXPECT_EQ(ConfigFromFlags<TestOptions>(TestOptionsFromFlags).status(),
            absl::InvalidArgumentError(
                "--checkpoint_dir=ck; this example writes no checkpoint "
                "(nothing would be saved or resumed): drop the flag"));
  ASSERT_EQ(Error({"--checkpoint_dir="}), "ok");
  EXPECT_THAT(std::string(ConfigFromFlags<TestOptions>(TestOptionsFromFlags)
                              .status()
                              .message()),
              HasSubstr("--checkpoint_every=-1; this example writes no"));
  ASSERT_EQ(Error({"--checkpoint_every=0", "--checkpoint_dir="}), "ok");
  absl::StatusOr<TestOptions> options =
      ConfigFromFlags<TestOptions>(TestOptionsFromFlags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->epochs, 1);
  // With `make`, its result.
  absl::StatusOr<int64_t> made = ConfigFromFlags(
      TestOptionsFromFlags,
      [](const TestOptions& o, checkpoint::CheckpointOptions c)
          -> absl::StatusOr<int64_t> { return o.epochs + c.every_steps; });
  EXPECT_EQ(*made, 1);
}

TEST(ConfigSetupTest, TheCheckIsAUsageErrorElseEveryRankRunsTheConfig) {
  ASSERT_EQ(Error({"--test_epochs=5"}), "ok");
  auto check = [](const TestConfig& c) {
    return c.epochs > 3 ? absl::InvalidArgumentError("too many")
                        : absl::OkStatus();
  };
  auto run = [](comm::Communicator&, const TestConfig&,
                Device) -> absl::StatusOr<int> { return 7; };
  EXPECT_EQ(
      ConfigSetup<TestConfig>(TestOptionsFromFlags, check, run)().status(),
      absl::InvalidArgumentError("too many"));
  ASSERT_EQ(Error({"--test_epochs=2"}), "ok");
  EXPECT_TRUE(ConfigSetup<TestConfig>(TestOptionsFromFlags, check, run)().ok());
}

TEST(ExampleHelpTest, ListsExitCodesCommonAndOwnFlagsAndTheEngines) {
  const std::string help =
      ExampleHelp({.name = "demo", .summary = "a demonstration."});
  EXPECT_THAT(help, HasSubstr("demo: a demonstration."));
  EXPECT_THAT(help, HasSubstr("Exit codes: 0 success, 1 runtime error"));
  EXPECT_THAT(help, HasSubstr("2 usage error"));
  EXPECT_THAT(help, HasSubstr("--backend  sim (ranks as threads in this "
                              "process), mpi"));
  EXPECT_THAT(help, HasSubstr("--timeout  Seconds every collective may take"));
  EXPECT_THAT(help, HasSubstr("--test_epochs  Epochs of the test."));
  EXPECT_THAT(help, HasSubstr("--world_size"));
}

}  // namespace
}  // namespace tandem::train
