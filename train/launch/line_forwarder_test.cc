#include "train/launch/line_forwarder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;

// What the forwarder wrote: an in-memory file read back.
class Sink {
 public:
  Sink() : fd_(memfd_create("sink", 0)) {}
  ~Sink() { close(fd_); }
  int fd() const { return fd_; }
  std::string Read() const {
    std::string out;
    char buf[1 << 16];
    ssize_t n;
    for (off_t at = 0; (n = pread(fd_, buf, sizeof(buf), at)) > 0; at += n) {
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
};

TEST(LineForwarderTest, ForwardsWholeLinesAndKeepsTheLastOnes) {
  Sink sink;
  LineForwarder f(sink.fd(), /*keep_lines=*/2);
  f.Feed("one\ntw");
  EXPECT_EQ(sink.Read(), "one\n");  // half a line is held back
  f.Feed("o\nthree\nfour");
  f.Finish();
  EXPECT_EQ(sink.Read(), "one\ntwo\nthree\nfour\n");
  EXPECT_THAT(f.Tail(), ElementsAre("three", "four"));
}

TEST(LineForwarderTest, ALongLineGoesOutAsItComesAndIsCutInTheTail) {
  Sink sink;
  LineForwarder f(sink.fd(), /*keep_lines=*/3, /*max_line=*/8);
  f.Feed("short\n0123456789");
  EXPECT_EQ(sink.Read(), "short\n0123456789");  // not held back
  f.Feed("abc");
  f.Feed("def\nnext\n");
  EXPECT_EQ(sink.Read(), "short\n0123456789abcdef\nnext\n");
  EXPECT_THAT(
      f.Tail(),
      ElementsAre("short", "01234567 [... line of 16 bytes, the first 8 kept]",
                  "next"));
}

TEST(LineForwarderTest, AnUnfinishedLongLineIsEndedAtFinish) {
  Sink sink;
  LineForwarder f(sink.fd(), 1, 4);
  f.Feed("abcdefgh");
  f.Finish();
  EXPECT_EQ(sink.Read(), "abcdefgh\n");
  EXPECT_THAT(f.Tail(),
              ElementsAre("abcd [... line of 8 bytes, the first 4 kept]"));
}

// 40 MB without a newline (issue 25: quadratic before, 3x the data in
// memory): every byte comes out once, in order.
TEST(LineForwarderTest, FortyMegabytesInOneLineComeOutByteForByte) {
  Sink sink;
  LineForwarder f(sink.fd(), 10);
  std::string chunk(65536, 'x');
  const int chunks = 40 * 1000 * 1000 / 65536 + 1;
  for (int i = 0; i < chunks; ++i) {
    chunk[0] = static_cast<char>('a' + i % 26);
    f.Feed(chunk);
  }
  f.Feed("\n");
  const std::string out = sink.Read();
  ASSERT_EQ(out.size(), static_cast<size_t>(chunks) * 65536 + 1);
  for (int i = 0; i < chunks; ++i) {
    ASSERT_EQ(out[static_cast<size_t>(i) * 65536], 'a' + i % 26) << i;
  }
  ASSERT_EQ(f.Tail().size(), 1u);
  EXPECT_EQ(f.Tail()[0].size(),
            LineForwarder::kDefaultMaxLine +
                std::string(" [... line of ").size() +
                std::to_string(static_cast<int64_t>(chunks) * 65536).size() +
                std::string(" bytes, the first 65536 kept]").size());
}

}  // namespace
}  // namespace tandem::train
