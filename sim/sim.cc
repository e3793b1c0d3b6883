#include "sim/sim.h"

#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/math_tally.h"
#include "base/status_macros.h"
#include "comm/launcher.h"
#include "comm/line_sink.h"
#include "comm/rank_printer.h"
#include "comm/validate.h"
#include "sim/cost/topology.h"
#include "sim/group.h"
#include "sim/options.h"
#include "sim/rank_thread.h"
#include "sim/sim_communicator.h"
#include "sim/thread_name.h"

namespace tandem::sim {
namespace {

absl::Status ValidateOptions(int world_size, const Options& options) {
  TANDEM_RETURN_IF_ERROR(comm::ValidateWorldSize(world_size));
  if (world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim::Run: world size must be at most ", kMaxWorldSize,
                     "; found ", world_size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim::Run: Options::timeout must be positive; found ",
                     absl::FormatDuration(options.timeout)));
  }
  if (options.stall_note_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim::Run: Options::stall_note_interval must be >= 0 (0: no notes); "
        "found ",
        absl::FormatDuration(options.stall_note_interval)));
  }
  if (options.stack_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim::Run: Options::stack_bytes must be >= 0 (0: the system "
        "default); found ",
        options.stack_bytes));
  }
  if (options.spin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sim::Run: Options::spin must be >= 0; found ",
                     absl::FormatDuration(options.spin)));
  }
  if (options.clock.has_value()) {
    const ClockOptions& c = *options.clock;
    if (c.topology.world_size() != world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim::Run: the network clock's topology (",
          cost::Describe(c.topology), ") has ", c.topology.world_size(),
          " GPUs but the run has ", world_size,
          " ranks; build the topology with as many nodes as the "
          "run needs (cost::MakeTopology)"));
    }
    if (!(c.compute_scale >= 0) || std::isinf(c.compute_scale)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim::Run: ClockOptions::compute_scale must be finite and >= 0; "
          "found ",
          c.compute_scale));
    }
    if (std::isnan(c.memory_scale) || std::isinf(c.memory_scale)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim::Run: ClockOptions::memory_scale must be finite (negative: "
          "off); found ",
          c.memory_scale));
    }
  }
  for (const Fault& fault : options.faults) {
    if (fault.rank < 0 || fault.rank >= world_size || fault.collective < 0 ||
        fault.delay < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim::Run: a fault needs 0 <= rank < world size ", world_size,
          ", collective >= 0 and delay >= 0; found rank ", fault.rank,
          ", collective ", fault.collective, ", delay ",
          absl::FormatDuration(fault.delay)));
    }
  }
  return absl::OkStatus();
}

absl::Status RunRank(const RankFn& fn, int rank, comm::Communicator& comm) {
  try {
    return fn(rank, comm);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("sim: rank ", rank, " threw an exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(
        absl::StrCat("sim: rank ", rank,
                     " threw an exception not derived from "
                     "std::exception"));
  }
}

}  // namespace

Fault Fault::FailAt(int rank, int64_t collective) {
  Fault f;
  f.kind = Kind::kFail;
  f.rank = rank;
  f.collective = collective;
  return f;
}

Fault Fault::DelayAt(int rank, int64_t collective, absl::Duration delay) {
  Fault f;
  f.kind = Kind::kDelay;
  f.rank = rank;
  f.collective = collective;
  f.delay = delay;
  return f;
}

bool RunResult::ok() const { return status().ok(); }

absl::Status RunResult::status() const {
  if (!launch.ok()) return launch;
  std::vector<comm::RankStatus> statuses;
  statuses.reserve(ranks.size());
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    statuses.push_back({r, ranks[r]});
  }
  return comm::MostTellingStatus(statuses);
}

RunResult Run(int world_size, const RankFn& fn, const Options& options) {
  RunResult result;
  result.launch = ValidateOptions(world_size, options);
  if (!result.launch.ok()) return result;

  // The clock's memory term needs the math kernels' share of each rank's
  // CPU time: counted while this run lasts.
  std::optional<base::MathTallyScope> math_tally;
  if (options.clock.has_value() && options.clock->memory_scale >= 0) {
    math_tally.emplace();
  }
  internal::Group group(world_size, options);
  if (options.capture != nullptr) options.capture->Reset(world_size);
  std::vector<std::unique_ptr<internal::SimCommunicator>> comms;
  comms.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    comm::LineSink& sink = options.capture != nullptr ? options.capture->sink(r)
                                                      : comm::StdoutLineSink();
    comms.push_back(
        std::make_unique<internal::SimCommunicator>(group, r, sink));
  }

  result.ranks.assign(world_size, absl::OkStatus());
  std::vector<std::unique_ptr<internal::RankThread>> threads;
  threads.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<std::unique_ptr<internal::RankThread>> thread =
        internal::RankThread::Start(
            [&, r] {
              internal::SetCurrentThreadName(comm::RankName(r));
              absl::Status status = RunRank(fn, r, *comms[r]);
              if (!status.ok()) {
                group.Abort(absl::AbortedError(absl::StrCat(
                    "sim: rank ", r, " failed: ", status.ToString())));
              }
              group.MarkExited(r);
              result.ranks[r] = std::move(status);
            },
            options.stack_bytes);
    if (!thread.ok()) {
      // Could not start a thread: stop the ranks that did start.
      result.launch = absl::Status(
          thread.status().code(),
          absl::StrCat("sim::Run: could not start the thread of rank ", r,
                       " of ", world_size, ": ", thread.status().message()));
      group.Abort(absl::AbortedError(result.launch.ToString()));
      for (int q = r; q < world_size; ++q) group.MarkExited(q);
      break;
    }
    threads.push_back(*std::move(thread));
  }
  for (auto& t : threads) t->Join();
  if (options.clock.has_value()) {
    result.clocks.reserve(world_size);
    for (const auto& c : comms) result.clocks.push_back(c->clock()->Read());
  }
  return result;
}

std::optional<ClockReading> ReadClock(comm::Communicator& comm) {
  auto* sim = dynamic_cast<internal::SimCommunicator*>(&comm);
  if (sim == nullptr || sim->clock() == nullptr) return std::nullopt;
  sim->clock()->Pause();
  sim->clock()->Resume();
  return sim->clock()->Read();
}

void AdvanceClock(comm::Communicator& comm, double seconds) {
  auto* sim = dynamic_cast<internal::SimCommunicator*>(&comm);
  if (sim == nullptr || sim->clock() == nullptr) return;
  sim->clock()->Advance(seconds);
}

}  // namespace tandem::sim
