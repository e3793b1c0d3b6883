// The collective conformance case runner, one rank's part of a
// CollectiveCase: make its buffers, issue every operation (all outstanding
// at once), wait for them in a rank-dependent order, check the results
// against a reference computed once per case. Internal to the suite
// (conformance.cc).
#ifndef TANDEM_COMM_CONFORMANCE_INTERNAL_COLLECTIVE_CASE_H_
#define TANDEM_COMM_CONFORMANCE_INTERNAL_COLLECTIVE_CASE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/conformance/conformance.h"
#include "comm/conformance/patterns.h"
#include "comm/launcher.h"
#include "comm/types.h"

namespace tandem::comm::conformance {

using Bytes = std::vector<uint8_t>;

// What output buffers hold before an operation writes them.
inline constexpr uint8_t kSentinel = 0xA5;

// `count` elements of `dtype` at element `offset` of `bytes`.
BufferView View(Bytes& bytes, DType dtype, int64_t offset, int64_t count);

// `count` elements of `pattern` for (rank, buffer).
Bytes Filled(Pattern pattern, DType dtype, int rank, int buffer, int64_t count);

// The results every rank should see, computed once per case (per process)
// before the ranks start.
struct Expected {
  std::vector<Bytes> per_buffer;
};

Expected ComputeExpected(const CollectiveCase& c);

// Rank `rank`'s part of case `c` on `comm`; OK when every output matches `e`
// and every separate input is unchanged.
absl::Status RunCollectiveCase(const CollectiveCase& c, const Expected& e,
                               int rank, Communicator& comm);

// Every status OK (a gtest failure per rank that is not, naming it).
void ExpectAllOk(const std::vector<RankStatus>& statuses, int world_size,
                 const Launcher& launcher);

// "Suite.Test" of the running gtest test (the watchdog's label).
std::string TestName();

}  // namespace tandem::comm::conformance

#endif  // TANDEM_COMM_CONFORMANCE_INTERNAL_COLLECTIVE_CASE_H_
