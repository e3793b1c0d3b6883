// TrafficCounter: a Communicator that forwards every call to another and
// adds up the bytes each operation puts on the wire, as the ZeRO paper
// counts traffic: an all-reduce twice its buffer (reduce-scatter +
// all-gather), an all-gather its received buffer, a reduce-scatter its sent
// one, a broadcast and a send their buffer (a receive counts on the sender).
//
//   comm::TrafficCounter counter(comm);
//   RunStep(counter);                 // a model wrapped around `counter`
//   int64_t bytes = counter.bytes;
//
// It does not forward native_tree_sum(): ordered sums through a counter run
// comm/ordered's Send/Recv algorithm, whose bytes are what a real network
// carries (and which tests use to check sim's native tree_sum against).
//
// Used by benchmarks and tests that measure traffic per step. Thread
// safety: belongs to the rank's thread, like the communicator it wraps,
// which must outlive it.
#ifndef TANDEM_COMM_TRAFFIC_COUNTER_H_
#define TANDEM_COMM_TRAFFIC_COUNTER_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

class TrafficCounter : public Communicator {
 public:
  explicit TrafficCounter(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view backend() const override { return inner_.backend(); }
  CommDevice device() const override { return inner_.device(); }
  std::unique_ptr<Work> AllReduce(BufferView buf, ReduceOp op) override {
    bytes += 2 * buf.bytes();
    return inner_.AllReduce(buf, op);
  }
  std::unique_ptr<Work> Broadcast(BufferView buf, int root) override {
    bytes += buf.bytes();
    return inner_.Broadcast(buf, root);
  }
  std::unique_ptr<Work> AllGather(BufferView send, BufferView recv) override {
    bytes += recv.bytes();
    return inner_.AllGather(send, recv);
  }
  std::unique_ptr<Work> ReduceScatter(BufferView send, BufferView recv,
                                      ReduceOp op) override {
    bytes += send.bytes();
    return inner_.ReduceScatter(send, recv, op);
  }
  std::unique_ptr<Work> Send(BufferView buf, int peer) override {
    bytes += buf.bytes();
    return inner_.Send(buf, peer);
  }
  std::unique_ptr<Work> Recv(BufferView buf, int peer) override {
    return inner_.Recv(buf, peer);
  }
  absl::Status Barrier() override { return inner_.Barrier(); }

  int64_t bytes = 0;  // since construction

 private:
  Communicator& inner_;
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_TRAFFIC_COUNTER_H_
