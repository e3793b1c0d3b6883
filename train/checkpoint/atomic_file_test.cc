#include "train/checkpoint/atomic_file.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tandem::train::checkpoint {
namespace {

std::vector<std::string> ListFolder(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  return names;
}

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(
      std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
      0);
  return dir;
}

TEST(AtomicFileTest, WritesReplacesAndLeavesNoTemporary) {
  const std::string dir = TestDir("replace");
  const std::string path = dir + "/f.bin";
  ASSERT_TRUE(WriteFileAtomically(path, std::string("old\0x", 5)).ok());
  EXPECT_EQ(*ReadFile(path), std::string("old\0x", 5));
  ASSERT_TRUE(WriteFileAtomically(path, "new content").ok());
  EXPECT_EQ(*ReadFile(path), "new content");
  EXPECT_EQ(ListFolder(dir), std::vector<std::string>{"f.bin"});
  EXPECT_TRUE(FileExists(path));
  EXPECT_FALSE(FileExists(dir + "/other"));
}

TEST(AtomicFileTest, MissingFolderFailsAndNamesThePath) {
  const std::string path = TestDir("missing") + "/no/such/f.bin";
  const absl::Status s = WriteFileAtomically(path, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("/no/such/f.bin"), std::string::npos) << s;
}

// Issue 25: a checkpoint file that is a device (here /dev/null) is written
// in place, never renamed over; a commit never renames onto one.
TEST(AtomicFileTest, DeviceIsWrittenInPlaceAndNeverRenamedOver) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(WriteFileAtomically("/dev/null", "bytes").ok());
  const std::string dir = TestDir("device");
  ASSERT_TRUE(WriteFileAtomically(dir + "/f.next", "x").ok());
  const absl::Status s = RenameDurably(dir + "/f.next", "/dev/null");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("/dev/null is not a regular file"),
            std::string::npos)
      << s;
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(ListFolder(dir), std::vector<std::string>{"f.next"});
}

TEST(AtomicFileTest, ReadingAMissingFileIsNotFound) {
  const absl::StatusOr<std::string> r =
      ReadFile(TestDir("read") + "/absent.bin");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("absent.bin"), std::string::npos);
}

}  // namespace
}  // namespace tandem::train::checkpoint
