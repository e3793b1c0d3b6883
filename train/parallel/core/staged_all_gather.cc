#include "train/parallel/core/staged_all_gather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "train/parallel/core/tensor_comm.h"

namespace tandem::train {

absl::Status AllGatherInt64(comm::Communicator& comm, Device device,
                            absl::Span<const int64_t> send,
                            absl::Span<int64_t> recv, absl::Duration timeout) {
  const int64_t n = static_cast<int64_t>(send.size());
  if (static_cast<int64_t>(recv.size()) != n * comm.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AllGatherInt64 on rank ", comm.rank(), ": recv holds ", recv.size(),
        " values; expected ", n, " sent values x ", comm.size(), " ranks"));
  }
  if (device.is_cpu()) {
    // The communicator does not write `send`; its view type is not const.
    const comm::BufferView send_view =
        comm::HostView(const_cast<int64_t*>(send.data()), n, comm::DType::kI64);
    return comm.AllGather(send_view, comm::HostView(recv))->Wait(timeout);
  }
  TANDEM_ASSIGN_OR_RETURN(
      Tensor host_send,
      Tensor::FromVector(std::vector<int64_t>(send.begin(), send.end())));
  TANDEM_ASSIGN_OR_RETURN(Tensor device_send, host_send.To(device));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor device_recv,
      Tensor::Empty({n * comm.size()}, DType::kI64, device));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView send_view,
                          ToBufferView(device_send));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv_view,
                          ToBufferView(device_recv));
  TANDEM_RETURN_IF_ERROR(comm.AllGather(send_view, recv_view)->Wait(timeout));
  TANDEM_ASSIGN_OR_RETURN(Tensor host_recv, device_recv.To(Device::CPU()));
  const int64_t* out = host_recv.data<int64_t>();
  std::copy(out, out + host_recv.numel(), recv.begin());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> AllGatherStrings(
    comm::Communicator& comm, Device device, const std::string& mine) {
  std::vector<int64_t> lengths(static_cast<size_t>(comm.size()));
  const int64_t length = static_cast<int64_t>(mine.size());
  TANDEM_RETURN_IF_ERROR(AllGatherInt64(
      comm, device, absl::MakeSpan(&length, 1), absl::MakeSpan(lengths)));
  int64_t longest = 0;
  for (int64_t n : lengths) longest = std::max(longest, n);
  const int64_t words = (longest + 7) / 8;
  std::vector<int64_t> send(static_cast<size_t>(words), 0);
  if (!mine.empty()) std::memcpy(send.data(), mine.data(), mine.size());
  std::vector<int64_t> all(static_cast<size_t>(words * comm.size()));
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm, device, send, absl::MakeSpan(all)));
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r) {
    const char* bytes = reinterpret_cast<const char*>(all.data() + r * words);
    out.emplace_back(bytes, static_cast<size_t>(lengths[r]));
  }
  return out;
}

absl::Status AllGatherF64Bits(comm::Communicator& comm, Device device,
                              absl::Span<const double> send,
                              absl::Span<double> recv) {
  static_assert(sizeof(double) == sizeof(int64_t));
  std::vector<int64_t> send_bits(send.size());
  std::memcpy(send_bits.data(), send.data(), send.size() * sizeof(double));
  std::vector<int64_t> recv_bits(recv.size());
  TANDEM_RETURN_IF_ERROR(
      AllGatherInt64(comm, device, send_bits, absl::MakeSpan(recv_bits)));
  std::memcpy(recv.data(), recv_bits.data(), recv.size() * sizeof(double));
  return absl::OkStatus();
}

namespace {

// AllReduceInt64 and AllReduceF64: one body for both element types.
template <typename T>
absl::Status AllReduceStaged(comm::Communicator& comm, Device device,
                             absl::Span<T> values, comm::ReduceOp op,
                             absl::Duration timeout) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (device.is_cpu()) {
    return comm.AllReduce(comm::HostView(values), op)->Wait(timeout);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor host, Tensor::FromVector(std::vector<T>(
                                           values.begin(), values.end())));
  TANDEM_ASSIGN_OR_RETURN(Tensor staged, host.To(device));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(staged));
  TANDEM_RETURN_IF_ERROR(comm.AllReduce(view, op)->Wait(timeout));
  TANDEM_ASSIGN_OR_RETURN(host, staged.To(Device::CPU()));
  const T* out = host.data<T>();
  std::copy(out, out + n, values.begin());
  return absl::OkStatus();
}

}  // namespace

absl::Status AllReduceInt64(comm::Communicator& comm, Device device,
                            absl::Span<int64_t> values, comm::ReduceOp op,
                            absl::Duration timeout) {
  return AllReduceStaged(comm, device, values, op, timeout);
}

absl::Status AllReduceF64(comm::Communicator& comm, Device device,
                          absl::Span<double> values, comm::ReduceOp op,
                          absl::Duration timeout) {
  return AllReduceStaged(comm, device, values, op, timeout);
}

absl::StatusOr<bool> SameOnEveryRank(comm::Communicator& comm, Device device,
                                     int64_t value, absl::Duration timeout) {
  int64_t both[2] = {value, ~value};
  TANDEM_RETURN_IF_ERROR(AllReduceInt64(comm, device, absl::MakeSpan(both),
                                        comm::ReduceOp::kMax, timeout));
  return both[0] == ~both[1];
}

}  // namespace tandem::train
