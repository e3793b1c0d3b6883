// The stall note: the one line every engine prints while a wait is stuck, so
// a stopped or missing rank is named long before the timeout, in the same
// words whichever engine runs:
//
//   rank 0: still waiting for #3 AllReduce(f32 x 4, sum) for 30s; not yet
//   issued by rank 1; timeout in 4m30s
//
// Engines print it from rank 0 only, every stall_note_interval of a blocked
// wait (sim::Options, MpiOptions, GlooOptions; 0: never). Thread-safe (one
// fputs per line).
#ifndef TANDEM_COMM_STALL_NOTE_H_
#define TANDEM_COMM_STALL_NOTE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace tandem::comm {

// The line (with its newline): "rank <rank>: still waiting for <what> for
// <waited>; <progress>; timeout in <left>" (or "; no timeout" when `left` is
// absl::InfiniteDuration()). Durations are cut to 100 ms.
std::string StallNote(int rank, std::string_view what, absl::Duration waited,
                      std::string_view progress, absl::Duration left);

// Writes StallNote(...) to stderr and flushes it.
void PrintStallNote(int rank, std::string_view what, absl::Duration waited,
                    std::string_view progress, absl::Duration left);

// Names the members a wait misses, at most kMaxNamedMembers of them, and
// counts the rest (a line naming 8000 ranks helps nobody): "rank 1",
// "ranks 1, 3", "ranks 0, 1, ..., 15 and 90 more". `noun` is the singular
// ("rank", "node"); the plural adds an "s". `ids` are printed in the order
// given; empty gives "no <noun>s".
inline constexpr int kMaxNamedMembers = 16;
std::string NameMembers(std::string_view noun, const std::vector<int64_t>& ids);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_STALL_NOTE_H_
