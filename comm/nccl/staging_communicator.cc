#include "comm/nccl/staging_communicator.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/nccl/device_buffer.h"

namespace tandem::comm {
namespace {

// A range of a staged device buffer that mirrors host memory.
struct Mirror {
  int buffer = 0;      // index into the staged buffers
  int64_t offset = 0;  // bytes into that device buffer
  BufferView host;     // the caller's memory
};

// Owns the device copies of one operation; copies outputs back when the
// device operation completes and checks that inputs were left alone.
class StagedWork final : public Work {
 public:
  StagedWork(std::unique_ptr<Work> inner, std::vector<DeviceBuffer> buffers,
             std::vector<Mirror> outputs, std::vector<Mirror> inputs,
             std::string what)
      : Work(inner->record()),
        inner_(std::move(inner)),
        buffers_(std::move(buffers)),
        outputs_(std::move(outputs)),
        inputs_(std::move(inputs)),
        what_(std::move(what)) {}

  bool IsCompleted() override {
    if (!done_ && inner_->IsCompleted()) {
      Finish(inner_->Wait(absl::ZeroDuration()));
    }
    return done_;
  }

  absl::Status Wait(absl::Duration timeout) override {
    if (done_) return status_;
    absl::Status s = inner_->Wait(timeout);
    if (!s.ok() && !inner_->IsCompleted()) return s;  // still in flight
    Finish(std::move(s));
    return status_;
  }

 private:
  void Finish(absl::Status s) {
    done_ = true;
    MarkEnded();
    if (!s.ok()) {
      status_ = std::move(s);
      return;
    }
    for (const Mirror& m : outputs_) {
      s = buffers_[m.buffer].CopyToHost(m.host.data, m.host.bytes(), m.offset);
      if (!s.ok()) {
        status_ = s;
        return;
      }
    }
    for (const Mirror& m : inputs_) {
      std::vector<char> after(static_cast<size_t>(m.host.bytes()));
      s = buffers_[m.buffer].CopyToHost(after.data(), m.host.bytes(), m.offset);
      if (!s.ok()) {
        status_ = s;
        return;
      }
      if (m.host.bytes() > 0 &&
          std::memcmp(after.data(), m.host.data, after.size()) != 0) {
        status_ = absl::InternalError(
            absl::StrCat(what_, ": the device operation modified its input (",
                         m.host.DebugString(), " staged on the device)"));
        return;
      }
    }
    status_ = absl::OkStatus();
  }

  std::unique_ptr<Work> inner_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<Mirror> outputs_;
  std::vector<Mirror> inputs_;
  std::string what_;
  bool done_ = false;
  absl::Status status_;
};

// Collects the device copies of one operation.
class Stager {
 public:
  explicit Stager(NcclCommunicator& comm) : comm_(comm) {}

  // Copies `host` into a new device buffer; returns its index.
  absl::StatusOr<int> Stage(const BufferView& host) {
    absl::StatusOr<DeviceBuffer> dev = DeviceBuffer::Allocate(
        comm_.device().ordinal, host.bytes(), comm_.compute_stream());
    if (!dev.ok()) return dev.status();
    if (absl::Status s = dev->CopyFromHost(host.data, host.bytes()); !s.ok()) {
      return s;
    }
    dev->set_release_stream(comm_.communication_stream());
    buffers_.push_back(*std::move(dev));
    hosts_.push_back(host);
    return static_cast<int>(buffers_.size()) - 1;
  }

  // The device view of `count` elements `offset_bytes` into buffer `index`.
  BufferView Device(int index, int64_t offset_bytes, int64_t count) const {
    const DType dtype = hosts_[index].dtype;
    return buffers_[index].View(dtype, offset_bytes / DTypeSize(dtype), count);
  }

  void Output(int index, int64_t offset_bytes, const BufferView& host) {
    outputs_.push_back({index, offset_bytes, host});
  }
  void Input(int index, const BufferView& host) {
    inputs_.push_back({index, 0, host});
  }

  std::unique_ptr<Work> Finish(std::unique_ptr<Work> inner, std::string what) {
    return std::make_unique<StagedWork>(std::move(inner), std::move(buffers_),
                                        std::move(outputs_), std::move(inputs_),
                                        std::move(what));
  }

 private:
  NcclCommunicator& comm_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<BufferView> hosts_;
  std::vector<Mirror> outputs_;
  std::vector<Mirror> inputs_;
};

bool SameAddress(const void* a, const void* b) { return a == b; }

}  // namespace

StagingCommunicator::StagingCommunicator(NcclCommunicator& device_comm)
    : device_(&device_comm) {}

StagingCommunicator::StagingCommunicator(
    std::unique_ptr<NcclCommunicator> owned)
    : owned_(std::move(owned)), device_(owned_.get()) {}

absl::StatusOr<std::unique_ptr<Communicator>> StagingCommunicator::Split(
    int color, int key) {
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> child =
      device_->SplitNccl(color, key);
  if (!child.ok()) return child.status();
  if (*child == nullptr) return nullptr;
  return std::unique_ptr<Communicator>(
      new StagingCommunicator(std::move(*child)));
}

std::unique_ptr<Work> StagingCommunicator::PostAllReduce(BufferView buf,
                                                         ReduceOp op) {
  Stager st(*device_);
  absl::StatusOr<int> b = st.Stage(buf);
  if (!b.ok()) return MakeCompletedWork(b.status());
  st.Output(*b, 0, buf);
  return st.Finish(device_->AllReduce(st.Device(*b, 0, buf.count), op),
                   "staged AllReduce");
}

std::unique_ptr<Work> StagingCommunicator::PostBroadcast(BufferView buf,
                                                         int root) {
  Stager st(*device_);
  absl::StatusOr<int> b = st.Stage(buf);
  if (!b.ok()) return MakeCompletedWork(b.status());
  st.Output(*b, 0, buf);
  return st.Finish(device_->Broadcast(st.Device(*b, 0, buf.count), root),
                   "staged Broadcast");
}

std::unique_ptr<Work> StagingCommunicator::PostAllGather(BufferView send,
                                                         BufferView recv) {
  Stager st(*device_);
  absl::StatusOr<int> r = st.Stage(recv);
  if (!r.ok()) return MakeCompletedWork(r.status());
  st.Output(*r, 0, recv);
  const int64_t slice = rank() * send.bytes();
  BufferView dev_send;
  if (send.count > 0 &&
      SameAddress(send.data, static_cast<char*>(recv.data) + slice)) {
    dev_send = st.Device(*r, slice, send.count);  // in place on the device too
  } else {
    absl::StatusOr<int> s = st.Stage(send);
    if (!s.ok()) return MakeCompletedWork(s.status());
    st.Input(*s, send);
    dev_send = st.Device(*s, 0, send.count);
  }
  return st.Finish(device_->AllGather(dev_send, st.Device(*r, 0, recv.count)),
                   "staged AllGather");
}

std::unique_ptr<Work> StagingCommunicator::PostReduceScatter(BufferView send,
                                                             BufferView recv,
                                                             ReduceOp op) {
  Stager st(*device_);
  absl::StatusOr<int> s = st.Stage(send);
  if (!s.ok()) return MakeCompletedWork(s.status());
  const int64_t slice = rank() * recv.bytes();
  BufferView dev_recv;
  if (recv.count > 0 &&
      SameAddress(recv.data, static_cast<char*>(send.data) + slice)) {
    dev_recv = st.Device(*s, slice, recv.count);  // in place on the device too
    st.Output(*s, slice, recv);
  } else {
    absl::StatusOr<int> r = st.Stage(recv);
    if (!r.ok()) return MakeCompletedWork(r.status());
    dev_recv = st.Device(*r, 0, recv.count);
    st.Output(*r, 0, recv);
    st.Input(*s, send);
  }
  return st.Finish(
      device_->ReduceScatter(st.Device(*s, 0, send.count), dev_recv, op),
      "staged ReduceScatter");
}

std::unique_ptr<Work> StagingCommunicator::PostSend(BufferView buf, int peer) {
  Stager st(*device_);
  absl::StatusOr<int> b = st.Stage(buf);
  if (!b.ok()) return MakeCompletedWork(b.status());
  st.Input(*b, buf);
  return st.Finish(device_->Send(st.Device(*b, 0, buf.count), peer),
                   "staged Send");
}

std::unique_ptr<Work> StagingCommunicator::PostRecv(BufferView buf, int peer) {
  Stager st(*device_);
  absl::StatusOr<int> b = st.Stage(buf);
  if (!b.ok()) return MakeCompletedWork(b.status());
  st.Output(*b, 0, buf);
  return st.Finish(device_->Recv(st.Device(*b, 0, buf.count), peer),
                   "staged Recv");
}

std::unique_ptr<Work> StagingCommunicator::PostBarrier() {
  return MakeCompletedWork(device_->Barrier());
}

}  // namespace tandem::comm
