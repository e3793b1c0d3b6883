#include "train/checkpoint/shard_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "train/checkpoint/json.h"

namespace tandem::train::checkpoint {
namespace {

// An open shard file, closed when it goes.
struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) close(fd);
  }
};

// Opens `path` without blocking (a FIFO named like a shard must not hang
// the load) and checks it is a regular file of `bytes` bytes.
absl::Status Open(const std::string& path, int64_t bytes, OpenFile& file) {
  file.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd < 0) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint shard ", path, " cannot be opened: ", std::strerror(errno),
        " (the index names it; the save that wrote it is incomplete or its "
        "files were moved)"));
  }
  struct stat st {};
  if (fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint shard ", path, " is not a regular file"));
  }
  if (st.st_size != bytes) {
    return absl::DataLossError(
        absl::StrCat("checkpoint shard ", path, " holds ", st.st_size,
                     " bytes; the index says ", bytes,
                     " (truncated, or a file of another save)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadPlannedShards(const std::string& dir, const ShardIndex& index,
                               absl::Span<const SliceRequest> requests,
                               absl::Span<const PlannedRead> reads,
                               absl::Span<void* const> dest) {
  if (dest.size() != requests.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadPlannedShards: ", dest.size(), " destinations for ",
                     requests.size(), " requests"));
  }
  std::map<std::string, OpenFile> files;
  for (const PlannedRead& read : reads) {
    if (read.request >= requests.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReadPlannedShards: a read for request ", read.request,
                       " of ", requests.size()));
    }
    const std::string path = absl::StrCat(dir, "/", read.file);
    auto [it, added] = files.try_emplace(read.file);
    if (added) {
      auto size = index.files.find(read.file);
      if (size == index.files.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ReadPlannedShards: ", JsonQuote(read.file),
                         " is not a file of the index"));
      }
      absl::Status opened = Open(path, size->second, it->second);
      if (!opened.ok()) return opened;
    }
    const SliceRequest& request = requests[read.request];
    const int64_t size = DTypeSize(index.tensors.at(request.tensor).dtype);
    char* out =
        static_cast<char*>(dest[read.request]) + read.dest_element * size;
    int64_t done = 0;
    while (done < read.bytes) {
      const ssize_t got = pread(it->second.fd, out + done, read.bytes - done,
                                read.file_offset + done);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return absl::DataLossError(
            absl::StrCat("checkpoint shard ", path, ": reading ", read.bytes,
                         " bytes at byte ", read.file_offset, " of tensor ",
                         JsonQuote(request.tensor), " failed",
                         got < 0 ? absl::StrCat(": ", std::strerror(errno))
                                 : std::string(" (the file ended)")));
      }
      done += got;
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train::checkpoint
