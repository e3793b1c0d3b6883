#include "base/run_paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::base {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A fresh, empty folder of its own for each call, resolved (TempDir may sit
// behind a link).
std::string TestDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/run_paths_" + name + "_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr) << dir;
  return ResolvedPath(dir);
}

void Touch(const std::string& path) { std::ofstream(path) << "data"; }

RunPath In(const std::string& flag, const std::string& path) {
  return {.flag = flag, .path = path, .role = PathRole::kInput};
}
RunPath Out(const std::string& flag, const std::string& path) {
  return {.flag = flag, .path = path, .role = PathRole::kOutput};
}
RunPath InOut(const std::string& flag, const std::string& path) {
  return {.flag = flag, .path = path, .role = PathRole::kInOut};
}

TEST(ResolvedPathTest, MissingTailsResolveThroughTheirDeepestFolder) {
  const std::string dir = TestDir("missing");
  EXPECT_EQ(ResolvedPath(dir + "/a/b/../c"), dir + "/a/c");
  EXPECT_EQ(ResolvedPath(dir + "//x/./y/"), dir + "/x/y");
  ASSERT_EQ(::symlink((dir + "/real").c_str(), (dir + "/link").c_str()), 0);
  // A link to nothing resolves to the target a write would create.
  EXPECT_EQ(ResolvedPath(dir + "/link"), dir + "/real");
  ASSERT_EQ(::mkdir((dir + "/real").c_str(), 0755), 0);
  EXPECT_EQ(ResolvedPath(dir + "/link/new.json"), dir + "/real/new.json");
}

TEST(CheckRunPathsTest, DistinctPathsPass) {
  const std::string dir = TestDir("distinct");
  Touch(dir + "/d.csv");
  EXPECT_TRUE(
      CheckRunPaths({In("--data", dir + "/d.csv"),
                     InOut("--checkpoint_dir", dir + "/ck"),
                     // "ck2" starts like "ck" but is not inside it.
                     Out("--trace", dir + "/ck2/t.json"),
                     Out("--metrics", dir + "/m.json"), Out("--export_hf", "")})
          .ok());
}

TEST(CheckRunPathsTest, AnOutputOverItsInputIsRefusedHoweverSpelled) {
  const std::string dir = TestDir("same");
  Touch(dir + "/d.csv");
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((dir + "/d.csv").c_str(), (dir + "/sym").c_str()), 0);
  ASSERT_EQ(::link((dir + "/d.csv").c_str(), (dir + "/hard").c_str()), 0);
  for (const std::string& spelling :
       {dir + "/d.csv", dir + "/sub/../d.csv", dir + "/./d.csv", dir + "/sym",
        dir + "/hard"}) {
    absl::Status s = CheckRunPaths(
        {In("--data", dir + "/d.csv"), Out("--metrics", spelling)});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << spelling;
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr("--metrics=" + spelling + " and --data="),
                      HasSubstr("are the same path"),
                      HasSubstr("writing --metrics would destroy what --data "
                                "reads"),
                      HasSubstr("Nothing was read or written")))
        << spelling;
  }
  // The hard link is named as one file under two names.
  EXPECT_THAT(CheckRunPaths({In("--data", dir + "/d.csv"),
                             Out("--metrics", dir + "/hard")})
                  .message(),
              HasSubstr(dir + "/hard and " + dir + "/d.csv are one file"));
}

TEST(CheckRunPathsTest, RelativePathsResolveFromTheWorkingFolder) {
  const std::string dir = TestDir("relative");
  Touch(dir + "/t.txt");
  char old[4096];
  ASSERT_NE(::getcwd(old, sizeof(old)), nullptr);
  ASSERT_EQ(::chdir(dir.c_str()), 0);
  absl::Status s =
      CheckRunPaths({In("--data", "t.txt"), Out("--trace", "./t.txt")});
  ASSERT_EQ(::chdir(old), 0);
  EXPECT_THAT(s.message(), HasSubstr("(" + dir + "/t.txt)"));
}

TEST(CheckRunPathsTest, AnOutputInsideACheckpointFolderIsRefused) {
  const std::string dir = TestDir("inside");
  ASSERT_EQ(::mkdir((dir + "/ck").c_str(), 0755), 0);
  absl::Status s =
      CheckRunPaths({InOut("--checkpoint_dir", dir + "/ck"),
                     Out("--trace", dir + "/ck/model.safetensors")});
  EXPECT_THAT(s.message(), AllOf(HasSubstr("--trace=" + dir +
                                           "/ck/model.safetensors is inside "
                                           "--checkpoint_dir="),
                                 HasSubstr("writing --trace would destroy what "
                                           "--checkpoint_dir holds"),
                                 HasSubstr("a path outside " + dir + "/ck")));
  // Also before the folder exists: the first save would write there.
  EXPECT_FALSE(CheckRunPaths({InOut("--checkpoint_dir", dir + "/new"),
                              Out("--metrics", dir + "/new/m.json")})
                   .ok());
}

TEST(CheckRunPathsTest, AnOutputFolderHoldingAnotherPathIsRefused) {
  const std::string dir = TestDir("holds");
  ASSERT_EQ(::mkdir((dir + "/x").c_str(), 0755), 0);
  Touch(dir + "/x/t.txt");
  absl::Status s = CheckRunPaths(
      {In("--data", dir + "/x/t.txt"), Out("--export_hf", dir + "/x")});
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("--export_hf=" + dir +
                              "/x is a folder that "
                              "holds --data="),
                    HasSubstr("writing --export_hf would destroy what --data "
                              "reads")));
  // The checkpoint folder is an output as well as an input.
  EXPECT_FALSE(CheckRunPaths({InOut("--checkpoint_dir", dir + "/x"),
                              Out("--export_hf", dir + "/x")})
                   .ok());
}

TEST(CheckRunPathsTest, TwoOutputsOnOnePathAreRefused) {
  const std::string dir = TestDir("two");
  absl::Status s =
      CheckRunPaths({Out("--trace", dir + "/x"), Out("--metrics", dir + "/x")});
  EXPECT_THAT(s.message(), HasSubstr("--trace=" + dir + "/x and --metrics=" +
                                     dir + "/x are the same path"));
}

TEST(CheckRunPathsTest, AnotherPathAmongATracesRankPartsIsRefused) {
  const std::string dir = TestDir("parts");
  RunPath trace = Out("--trace", dir + "/t.json");
  trace.rank_parts = true;
  absl::Status s =
      CheckRunPaths({trace, Out("--metrics", dir + "/t.json.rank1")});
  EXPECT_THAT(s.message(), HasSubstr("--metrics=" + dir +
                                     "/t.json.rank1 is one of --trace=" + dir +
                                     "/t.json's per-rank parts"));
  trace.rank_parts = false;
  EXPECT_TRUE(
      CheckRunPaths({trace, Out("--metrics", dir + "/t.json.rank1")}).ok());
}

TEST(IsRankPartTest, OnlyDigitsAfterTheRankSuffix) {
  EXPECT_TRUE(IsRankPart("t.json", "t.json.rank0"));
  EXPECT_TRUE(IsRankPart("/a/t.json", "/a/t.json.rank123"));
  EXPECT_FALSE(IsRankPart("t.json", "t.json.rank"));
  EXPECT_FALSE(IsRankPart("t.json", "t.json.rank1x"));
  EXPECT_FALSE(IsRankPart("t.json", "t.json.rank1/x"));
  EXPECT_FALSE(IsRankPart("t.json", "u.json.rank1"));
}

TEST(CheckRunPathsTest, CharacterDevicesAndInputsAmongThemselvesPass) {
  EXPECT_TRUE(CheckRunPaths(
                  {Out("--trace", "/dev/null"), Out("--metrics", "/dev/null")})
                  .ok());
  const std::string dir = TestDir("inputs");
  Touch(dir + "/a");
  EXPECT_TRUE(
      CheckRunPaths({In("--data", dir + "/a"), In("--init_from", dir + "/a")})
          .ok());
}

TEST(CheckRunPathsTest, EveryConflictIsNamedInOneMessage) {
  const std::string dir = TestDir("every");
  Touch(dir + "/d");
  absl::Status s =
      CheckRunPaths({In("--data", dir + "/d"), Out("--trace", dir + "/d"),
                     Out("--metrics", dir + "/d")});
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("--trace=" + dir + "/d and --data="),
                    HasSubstr("--metrics=" + dir + "/d and --data="),
                    HasSubstr("--trace=" + dir + "/d and --metrics=")));
}

}  // namespace
}  // namespace tandem::base
