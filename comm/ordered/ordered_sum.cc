#include "comm/ordered/ordered_sum.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/reduce.h"
#include "comm/work.h"

namespace tandem::comm {
namespace {

bool Supported(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64;
}

absl::Status CheckView(const Communicator& comm, const char* what,
                       const BufferView& view, const char* name) {
  if (!Supported(view.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " on rank ", comm.rank(), " of ", comm.size(), ": ", name, " is ",
        view.DebugString(),
        "; ordered sums take f32 or f64 (convert the buffer first)"));
  }
  if (view.space != MemorySpace::kHost) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " on rank ", comm.rank(), " of ", comm.size(), ": ", name, " is ",
        view.DebugString(),
        "; ordered sums run on host memory (stage the buffer through the "
        "host)"));
  }
  if (view.count < 0 || (view.count > 0 && view.data == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " on rank ", comm.rank(), ": ", name, " is ",
                     view.DebugString(), " with no memory"));
  }
  return absl::OkStatus();
}

BufferView Slice(const BufferView& view, int64_t offset, int64_t count) {
  BufferView out = view;
  out.data = static_cast<char*>(view.data) + offset * DTypeSize(view.dtype);
  out.count = count;
  return out;
}

// Waits for `work`, naming the step when it fails.
absl::Status Finish(std::unique_ptr<Work> work, const Communicator& comm,
                    const char* what, const std::string& step) {
  absl::Status s = work->Wait();
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(what, " on rank ", comm.rank(), " of ",
                                   comm.size(), ", ", step, ": ", s.message()));
}

}  // namespace

absl::Status CanonicalTreeSum(DType dtype, int64_t count,
                              absl::Span<const void* const> leaves, void* out) {
  if (leaves.empty() || count < 0 || !Supported(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CanonicalTreeSum: ", leaves.size(), " leaves of ", count,
        " elements of ", DTypeName(dtype),
        "; expected at least one leaf, a count >= 0 and f32 or f64"));
  }
  void* dst[] = {out};
  // The tree is comm::ReduceInto's kTreeSum: one kernel for this sum and
  // for the engines that offer it natively (sim).
  return ReduceInto(dtype, ReduceOp::kTreeSum, count, leaves, dst, 1);
}

char* OrderedSumWorkspace::Scratch(int slot, int64_t bytes) {
  Buffer& b = buffers_[slot];
  if (b.bytes < bytes) {
    b.data.reset(new char[static_cast<size_t>(bytes)]);
    b.bytes = bytes;
  }
  return b.data.get();
}

absl::Status OrderedReduceScatter(Communicator& comm, BufferView send,
                                  BufferView recv,
                                  OrderedSumWorkspace* workspace) {
  constexpr char kWhat[] = "OrderedReduceScatter";
  TANDEM_RETURN_IF_ERROR(CheckView(comm, kWhat, send, "send"));
  TANDEM_RETURN_IF_ERROR(CheckView(comm, kWhat, recv, "recv"));
  const int64_t world = comm.size();
  const int64_t rank = comm.rank();
  const int64_t c = recv.count;
  if (send.dtype != recv.dtype || send.count != world * c) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWhat, " on rank ", rank, " of ", world, ": send is ",
        send.DebugString(), " and recv ", recv.DebugString(),
        "; expected send to hold size() x recv.count elements of recv's "
        "dtype"));
  }
  if (c == 0) return absl::OkStatus();
  if (comm.native_tree_sum()) {
    return Finish(comm.ReduceScatter(send, recv, ReduceOp::kTreeSum), comm,
                  kWhat, "the engine's tree_sum");
  }
  OrderedSumWorkspace own;
  if (workspace == nullptr) workspace = &own;
  const int64_t bytes = c * DTypeSize(recv.dtype);
  // Slot q < rank holds rank q's term of this rank's segment, slot q - 1
  // for q > rank; this rank's own term is read where it is.
  char* received = workspace->Scratch(0, (world - 1) * bytes);
  auto slot = [&](int64_t q) {
    return received + (q < rank ? q : q - 1) * bytes;
  };
  for (int64_t i = 1; i < world; ++i) {
    const int64_t to = (rank + i) % world;
    const int64_t from = (rank - i + world) % world;
    std::unique_ptr<Work> got =
        comm.Recv(HostView(slot(from), c, recv.dtype), static_cast<int>(from));
    std::unique_ptr<Work> sent =
        comm.Send(Slice(send, to * c, c), static_cast<int>(to));
    TANDEM_RETURN_IF_ERROR(Finish(std::move(got), comm, kWhat,
                                  absl::StrCat("receiving from rank ", from)));
    TANDEM_RETURN_IF_ERROR(Finish(std::move(sent), comm, kWhat,
                                  absl::StrCat("sending to rank ", to)));
  }
  std::vector<const void*> leaves(static_cast<size_t>(world));
  for (int64_t q = 0; q < world; ++q) {
    leaves[q] = q == rank ? Slice(send, rank * c, c).data : slot(q);
  }
  // `recv` may be this rank's own leaf: every chunk is read before written.
  return CanonicalTreeSum(recv.dtype, c, leaves, recv.data);
}

absl::Status OrderedAllReduce(Communicator& comm, BufferView buf,
                              OrderedSumWorkspace* workspace) {
  constexpr char kWhat[] = "OrderedAllReduce";
  TANDEM_RETURN_IF_ERROR(CheckView(comm, kWhat, buf, "buf"));
  const int64_t world = comm.size();
  if (world == 1 || buf.count == 0) return absl::OkStatus();
  if (comm.native_tree_sum()) {
    return Finish(comm.AllReduce(buf, ReduceOp::kTreeSum), comm, kWhat,
                  "the engine's tree_sum");
  }
  OrderedSumWorkspace own;
  if (workspace == nullptr) workspace = &own;
  const int64_t segment = (buf.count + world - 1) / world;
  const int64_t size = DTypeSize(buf.dtype);
  // Segments in `buf` itself, or in a copy padded with zeros to world x
  // segment elements (a padded element is summed only with padding).
  BufferView all = buf;
  if (segment * world != buf.count) {
    char* padded = workspace->Scratch(1, world * segment * size);
    std::memcpy(padded, buf.data, static_cast<size_t>(buf.count * size));
    std::memset(padded + buf.count * size, 0,
                static_cast<size_t>((world * segment - buf.count) * size));
    all = HostView(padded, world * segment, buf.dtype);
  }
  const BufferView mine = Slice(all, comm.rank() * segment, segment);
  TANDEM_RETURN_IF_ERROR(OrderedReduceScatter(comm, all, mine, workspace));
  TANDEM_RETURN_IF_ERROR(
      Finish(comm.AllGather(mine, all), comm, kWhat, "gathering the sums"));
  if (all.data != buf.data) {
    std::memcpy(buf.data, all.data, static_cast<size_t>(buf.count * size));
  }
  return absl::OkStatus();
}

}  // namespace tandem::comm
