#include "base/input_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string Dir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/input_file";
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(InputFileTest, ReadsARegularFile) {
  const std::string path = Dir() + "/plain";
  std::ofstream(path) << "a,b\n1,2\n";
  absl::StatusOr<std::string> got = ReadInputFile(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "a,b\n1,2\n");
  EXPECT_FALSE(IsStreamInput(path));
}

TEST(InputFileTest, RefusesDevicesAndDirectoriesNamingThem) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    absl::StatusOr<std::string> got = ReadInputFile(device);
    ASSERT_FALSE(got.ok()) << device;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(),
                HasSubstr(std::string(device) + " is a character device"));
  }
  // A symlink to /dev/zero is the device it names.
  const std::string link = Dir() + "/model.safetensors";
  std::filesystem::remove(link);
  std::filesystem::create_symlink("/dev/zero", link);
  EXPECT_THAT(ReadInputFile(link).status().message(),
              HasSubstr("model.safetensors is a character device"));
  EXPECT_THAT(ReadInputFile(Dir()).status().message(),
              HasSubstr("input_file is a directory"));
  EXPECT_EQ(ReadInputFile(Dir() + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(InputFileTest, RefusesMoreThanTheBound) {
  const std::string path = Dir() + "/big";
  std::ofstream(path) << std::string(100, 'x');
  absl::StatusOr<std::string> got = ReadInputFile(path, {.max_bytes = 99});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(got.status().message(), HasSubstr("big holds 100 bytes"));
  EXPECT_TRUE(ReadInputFile(path, {.max_bytes = 100}).ok());
}

TEST(InputFileTest, AFifoNobodyWritesIsRefusedInTime) {
  const std::string path = Dir() + "/fifo_alone";
  std::filesystem::remove(path);
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EXPECT_TRUE(IsStreamInput(path));
  absl::StatusOr<std::string> got =
      ReadInputFile(path, {.writer_wait = absl::Milliseconds(100)});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(got.status().message(),
              HasSubstr("fifo_alone is a FIFO and nothing wrote to it"));
}

TEST(InputFileTest, AFifoIsReadOnceAndBounded) {
  const std::string path = Dir() + "/fifo";
  std::filesystem::remove(path);
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&] {
    const int fd = open(path.c_str(), O_WRONLY);
    const std::string data(200000, 'y');
    if (write(fd, data.data(), data.size()) < 0) {
    }
    close(fd);
  });
  absl::StatusOr<std::string> got =
      ReadInputFile(path, {.writer_wait = absl::Seconds(60)});
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 200000u);

  signal(SIGPIPE, SIG_IGN);  // the reader stops early: the writer's EPIPE
  std::thread writer2([&] {
    const int fd = open(path.c_str(), O_WRONLY);
    const std::string data(200000, 'y');
    if (write(fd, data.data(), data.size()) < 0) {
    }
    close(fd);
  });
  got = ReadInputFile(path,
                      {.max_bytes = 1000, .writer_wait = absl::Seconds(60)});
  writer2.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(got.status().message(), HasSubstr("more than the 1000 bytes"));
}

}  // namespace
}  // namespace tandem
