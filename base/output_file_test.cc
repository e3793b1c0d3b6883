#include "base/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::base {
namespace {

using ::testing::HasSubstr;

// A fresh, empty folder of its own for each call.
std::string TestDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/output_file_" + name + "_XXXXXX";
  EXPECT_NE(::mkdtemp(dir.data()), nullptr) << dir;
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> ListFolder(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

TEST(OutputFileTest, RegularFileIsReplacedAndNoTemporaryStays) {
  const std::string dir = TestDir("regular");
  ASSERT_TRUE(WriteOutputFile(dir + "/f", "old", "test").ok());
  ASSERT_TRUE(WriteOutputFile(dir + "/f", "new", "test").ok());
  EXPECT_EQ(Read(dir + "/f"), "new");
  EXPECT_EQ(ListFolder(dir), std::vector<std::string>{"f"});
}

// Issue 25: --trace=/dev/null replaced the system's /dev/null with a regular
// file (as root). A device is written in place.
TEST(OutputFileTest, DeviceIsWrittenInPlace) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(WriteOutputFile("/dev/null", "bytes", "test").ok());
  ASSERT_TRUE(CheckOutputPath("/dev/null", "--trace=/dev/null").ok());
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_rdev, before.st_rdev);
  EXPECT_NE(::access(absl::StrCat("/dev/null.probe", ::getpid()).c_str(), F_OK),
            0);
}

// A link is followed: its target is replaced, the link stays a link.
TEST(OutputFileTest, SymlinkIsFollowedAndStaysALink) {
  const std::string dir = TestDir("link");
  ASSERT_EQ(::mkdir((dir + "/real").c_str(), 0755), 0);
  ASSERT_TRUE(WriteOutputFile(dir + "/real/t.json", "old", "test").ok());
  ASSERT_EQ(::symlink("real/t.json", (dir + "/t.json").c_str()), 0);
  ASSERT_TRUE(CheckOutputPath(dir + "/t.json", "--trace").ok());
  ASSERT_TRUE(WriteOutputFile(dir + "/t.json", "new", "test").ok());
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/t.json").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(Read(dir + "/real/t.json"), "new");
  EXPECT_EQ(ListFolder(dir + "/real"), std::vector<std::string>{"t.json"});
}

TEST(OutputFileTest, DanglingLinkIsRefused) {
  const std::string dir = TestDir("dangling");
  ASSERT_EQ(::symlink("nowhere/x", (dir + "/t.json").c_str()), 0);
  const absl::Status s = WriteOutputFile(dir + "/t.json", "x", "trace");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("trace: " + dir +
                        "/t.json is a symbolic link to a file that does not "
                        "exist"));
  EXPECT_FALSE(CheckOutputPath(dir + "/t.json", "--trace").ok());
}

TEST(OutputFileTest, DirectoryIsRefused) {
  const std::string dir = TestDir("dir");
  const absl::Status s = WriteOutputFile(dir, "x", "trace");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(dir + " is a directory"));
  EXPECT_THAT(CheckOutputPath(dir, "--trace=" + dir).message(),
              HasSubstr("--trace=" + dir + ": " + dir + " is a directory"));
}

// A FIFO is written in place when someone reads it, refused (not waited on)
// when nobody does.
TEST(OutputFileTest, FifoIsWrittenInPlaceOnlyWithAReader) {
  const std::string fifo = TestDir("fifo") + "/p";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const absl::Status none = WriteOutputFile(fifo, "x", "trace");
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition) << none;
  EXPECT_THAT(none.message(), HasSubstr("is a FIFO that nobody is reading"));
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteOutputFile(fifo, "through", "trace").ok());
  char buf[16] = {};
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 7);
  EXPECT_EQ(std::string(buf), "through");
  ::close(reader);
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(OutputFileTest, MissingFolderIsNamed) {
  const std::string path = TestDir("missing") + "/no/such/t.json";
  const absl::Status s = WriteOutputFile(path, "x", "trace");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("/no/such/t.json"));
  EXPECT_THAT(CheckOutputPath(path, "--trace=" + path).message(),
              HasSubstr("--trace=" + path + ": cannot create the file"));
}

TEST(OutputFileTest, RenameNeverReplacesALinkOrDevice) {
  const std::string dir = TestDir("rename");
  ASSERT_TRUE(WriteOutputFile(dir + "/f.next", "x", "test").ok());
  ASSERT_TRUE(WriteOutputFile(dir + "/target", "kept", "test").ok());
  ASSERT_EQ(::symlink("target", (dir + "/f").c_str()), 0);
  const absl::Status s = RenameDurably(dir + "/f.next", dir + "/f", "test");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr(dir + "/f is a symbolic link"));
  EXPECT_EQ(Read(dir + "/target"), "kept");
  ASSERT_EQ(::unlink((dir + "/f").c_str()), 0);
  ASSERT_TRUE(RenameDurably(dir + "/f.next", dir + "/f", "test").ok());
  EXPECT_EQ(Read(dir + "/f"), "x");
}

TEST(OutputFileTest, AnOutputFolderIsCheckedBeforeTheRun) {
  const std::string dir = TestDir("folder");
  // A folder, or an absent one whose parent is a folder: fine, and the
  // check leaves nothing behind.
  EXPECT_TRUE(CheckOutputFolder(dir, "--export_hf=" + dir).ok());
  EXPECT_TRUE(CheckOutputFolder(dir + "/new/", "--export_hf=x").ok());
  EXPECT_TRUE(ListFolder(dir).empty());
  ASSERT_TRUE(WriteOutputFile(dir + "/file", "x", "test").ok());
  ASSERT_EQ(::symlink((dir + "/nothing").c_str(), (dir + "/dangling").c_str()),
            0);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {dir + "/file", "is a file, not a folder"},
      {"/dev/null", "is a character device, not a folder"},
      {dir + "/dangling", "is a symbolic link to nothing"},
      {dir + "/no/such", "its parent " + dir + "/no is not an existing folder"},
      {dir + "/file/sub", "its parent " + dir + "/file is not an existing"},
  };
  for (const auto& [path, phrase] : refused) {
    const absl::Status s = CheckOutputFolder(path, "--export_hf=" + path);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(s.message(), HasSubstr("--export_hf=" + path + ": ")) << path;
    EXPECT_THAT(s.message(), HasSubstr(phrase)) << path;
  }
}

}  // namespace
}  // namespace tandem::base
