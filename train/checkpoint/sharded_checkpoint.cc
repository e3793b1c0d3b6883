#include "train/checkpoint/sharded_checkpoint.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "tensor/nn/module.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/json.h"
#include "train/checkpoint/safetensors.h"
#include "train/checkpoint/shard_reader.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train::checkpoint {
namespace {

constexpr char kShardPrefix[] = "shard-";
constexpr char kShardSuffix[] = ".safetensors";

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status CheckSlice(const OwnedSlice& s, int rank) {
  const int64_t numel = Numel(s.shape);
  if (s.begin < 0 || s.end <= s.begin || s.end > numel || !s.data.defined() ||
      s.data.numel() != s.end - s.begin || s.data.dtype() != s.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharded checkpoint on rank ", rank, ": the slice [", s.begin, ", ",
        s.end, ") of ", JsonQuote(s.tensor), " (", numel, " elements of ",
        DTypeName(s.dtype), ") holds ",
        s.data.defined() ? absl::StrCat(s.data.numel(), " elements of ",
                                        DTypeName(s.data.dtype()))
                         : std::string("no tensor"),
        "; expected a non-empty range inside the tensor and its elements"));
  }
  return absl::OkStatus();
}

// This rank's part of the save, as the gather carries it: "ok" or "error"
// on the first line, then the file's name and size and one line per slice
// (name, dtype, shape, begin, end, byte offset; tab-separated), or the
// error's message.
std::string Report(const absl::Status& status, const std::string& file,
                   int64_t bytes, absl::Span<const OwnedSlice> slices,
                   const std::vector<int64_t>& offsets) {
  if (!status.ok()) return absl::StrCat("error\n", status.ToString());
  std::string out = absl::StrCat("ok\n", file, "\t", bytes, "\n");
  for (size_t i = 0; i < slices.size(); ++i) {
    const OwnedSlice& s = slices[i];
    absl::StrAppend(&out, s.tensor, "\t",
                    std::string(SafetensorsDTypeName(s.dtype)), "\t",
                    absl::StrJoin(s.shape, ","), "\t", s.begin, "\t", s.end,
                    "\t", offsets[i], "\n");
  }
  return out;
}

// Adds rank `rank`'s report to `index` (its file and slices, unsorted).
absl::Status AddReport(const std::string& report, int rank, ShardIndex& index) {
  std::vector<std::string> lines = absl::StrSplit(report, '\n');
  if (lines.empty() || lines[0] != "ok") {
    return absl::InternalError(absl::StrCat(
        "sharded checkpoint: rank ", rank, " could not write its shard: ",
        lines.size() > 1 ? report.substr(report.find('\n') + 1) : report));
  }
  auto bad = [&](const std::string& line) {
    return absl::InternalError(absl::StrCat("sharded checkpoint: rank ", rank,
                                            "'s report line \"", line,
                                            "\" is malformed (a bug)"));
  };
  std::vector<std::string> head = absl::StrSplit(lines[1], '\t');
  int64_t bytes = 0;
  if (head.size() != 2 || !absl::SimpleAtoi(head[1], &bytes)) {
    return bad(lines[1]);
  }
  const std::string file = head[0];
  index.files[file] = bytes;
  for (size_t l = 2; l < lines.size(); ++l) {
    if (lines[l].empty()) continue;
    std::vector<std::string> f = absl::StrSplit(lines[l], '\t');
    IndexSlice slice;
    slice.file = file;
    std::vector<int64_t> shape;
    if (f.size() != 6 || !absl::SimpleAtoi(f[3], &slice.begin) ||
        !absl::SimpleAtoi(f[4], &slice.end) ||
        !absl::SimpleAtoi(f[5], &slice.offset)) {
      return bad(lines[l]);
    }
    for (absl::string_view d : absl::StrSplit(f[2], ',', absl::SkipEmpty())) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v)) return bad(lines[l]);
      shape.push_back(v);
    }
    const std::optional<DType> dtype = SafetensorsDTypeFromName(f[1]);
    if (!dtype.has_value()) return bad(lines[l]);
    auto [it, added] = index.tensors.try_emplace(f[0]);
    IndexTensor& t = it->second;
    if (added) {
      t.dtype = *dtype;
      t.shape = shape;
    } else if (t.dtype != *dtype || t.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharded checkpoint: the ranks disagree on tensor ", JsonQuote(f[0]),
          ": ", DTypeName(t.dtype), " [", absl::StrJoin(t.shape, ", "),
          "] and, on rank ", rank, ", ", DTypeName(*dtype), " [",
          absl::StrJoin(shape, ", "), "]"));
    }
    t.slices.push_back(std::move(slice));
  }
  return absl::OkStatus();
}

// Removes the shard files of `dir` that `index` does not name. Best effort:
// a file that cannot be removed costs disk space, not correctness (loads
// read only what the index names).
void RemoveUnindexedShards(const std::string& dir, const ShardIndex& index) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const size_t p = sizeof(kShardPrefix) - 1;
    const size_t q = sizeof(kShardSuffix) - 1;
    if (name.size() > p + q && name.compare(0, p, kShardPrefix) == 0 &&
        name.find(kShardSuffix, name.size() - q) != std::string::npos &&
        !index.files.contains(name)) {
      stale.push_back(name);
    }
  }
  closedir(d);
  for (const std::string& name : stale) {
    unlink(absl::StrCat(dir, "/", name).c_str());
  }
}

}  // namespace

absl::Status SaveShardedCheckpoint(
    comm::Communicator& comm, Device device, const std::string& dir,
    int64_t step, absl::Span<const OwnedSlice> slices,
    const std::map<std::string, std::string>& metadata) {
  const int rank = comm.rank();
  const int world = comm.size();
  // One name for this save's files on every rank: rank 0's clock and
  // process, so no save overwrites a file another index names.
  const int64_t mine =
      rank == 0 ? static_cast<int64_t>(
                      std::chrono::steady_clock::now().time_since_epoch() /
                      std::chrono::nanoseconds(1)) ^
                      (static_cast<int64_t>(getpid()) << 40)
                : 0;
  std::vector<int64_t> nonces(static_cast<size_t>(world));
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(
      comm, device, absl::MakeConstSpan(&mine, 1), absl::MakeSpan(nonces)));
  const std::string file = absl::StrCat(
      kShardPrefix, step, "-", absl::Hex(static_cast<uint64_t>(nonces[0])), "-",
      rank, "-of-", world, kShardSuffix);

  // This rank's file: its slices as 1-d tensors named "<tensor>@<begin>",
  // packed in order after the header.
  absl::Status wrote = absl::OkStatus();
  int64_t bytes = 0;
  std::vector<int64_t> offsets;
  for (const OwnedSlice& s : slices) {
    wrote.Update(CheckSlice(s, rank));
  }
  if (wrote.ok()) {
    nn::StateDict tensors;
    for (const OwnedSlice& s : slices) {
      absl::StatusOr<Tensor> flat = s.data.Reshape({s.end - s.begin});
      if (!flat.ok()) {
        absl::StatusOr<Tensor> copy = s.data.Clone();
        if (copy.ok()) flat = copy->Reshape({s.end - s.begin});
      }
      if (!flat.ok()) {
        wrote = flat.status();
        break;
      }
      tensors.push_back({absl::StrCat(s.tensor, "@", s.begin), *flat});
    }
    absl::StatusOr<std::string> encoded =
        wrote.ok() ? EncodeSafetensors(tensors) : wrote;
    if (encoded.ok()) {
      uint64_t header = 0;
      std::memcpy(&header, encoded->data(), sizeof(header));  // little endian
      int64_t at = 8 + static_cast<int64_t>(header);
      for (const OwnedSlice& s : slices) {
        offsets.push_back(at);
        at += (s.end - s.begin) * DTypeSize(s.dtype);
      }
      bytes = static_cast<int64_t>(encoded->size());
      wrote = WriteFileAtomically(absl::StrCat(dir, "/", file), *encoded);
    } else {
      wrote = encoded.status();
    }
  }
  TANDEM_ASSIGN_OR_RETURN(
      const std::vector<std::string> reports,
      AllGatherStrings(comm, device,
                       Report(wrote, file, bytes, slices, offsets)));

  // Rank 0: the index, from every rank's report, written last.
  absl::Status committed = absl::OkStatus();
  if (rank == 0) {
    ShardIndex index;
    index.metadata = metadata;
    for (int r = 0; r < world && committed.ok(); ++r) {
      committed = AddReport(reports[r], r, index);
    }
    for (auto& [name, t] : index.tensors) {
      std::sort(t.slices.begin(), t.slices.end(),
                [](const IndexSlice& a, const IndexSlice& b) {
                  return a.begin < b.begin;
                });
    }
    absl::StatusOr<std::string> json =
        committed.ok() ? EncodeShardIndex(index) : committed;
    if (json.ok()) {
      committed =
          WriteFileAtomically(absl::StrCat(dir, "/", kShardIndexFile), *json);
    } else {
      committed = json.status();
    }
    if (committed.ok()) RemoveUnindexedShards(dir, index);
  }
  // Every rank returns rank 0's outcome.
  TANDEM_ASSIGN_OR_RETURN(
      const std::vector<std::string> outcome,
      AllGatherStrings(comm, device,
                       rank == 0 && !committed.ok()
                           ? std::string(committed.message())
                           : std::string()));
  if (!outcome[0].empty()) {
    return absl::Status(
        committed.ok() ? absl::StatusCode::kInternal : committed.code(),
        absl::StrCat(
            "sharded checkpoint of step ", step, " in ", dir,
            " was not committed (the previous one stays): ", outcome[0]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kShardIndexFile);
  TANDEM_ASSIGN_OR_RETURN(const std::string json, ReadFile(path));
  return ParseShardIndex(json, path);
}

absl::StatusOr<std::vector<Tensor>> LoadShardedSlices(
    const std::string& dir, const ShardIndex& index,
    absl::Span<const SliceRequest> requests) {
  TANDEM_ASSIGN_OR_RETURN(const std::vector<PlannedRead> reads,
                          PlanReads(index, requests, dir));
  std::vector<Tensor> out;
  std::vector<void*> dest;
  for (const SliceRequest& r : requests) {
    TANDEM_ASSIGN_OR_RETURN(
        Tensor t,
        Tensor::Empty({r.end - r.begin}, index.tensors.at(r.tensor).dtype,
                      Device::CPU()));
    dest.push_back(t.raw_data());
    out.push_back(std::move(t));
  }
  TANDEM_RETURN_IF_ERROR(ReadPlannedShards(dir, index, requests, reads, dest));
  return out;
}

}  // namespace tandem::train::checkpoint
