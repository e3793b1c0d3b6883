#include "sim/sim.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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
#include "sim/fiber.h"
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
  if (options.fiber_workers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sim::Run: Options::fiber_workers must be >= 0 (0: one per "
        "hardware thread); found ",
        options.fiber_workers));
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
  // What rank r runs, on its thread or fiber.
  auto body = [&](int r) {
    absl::Status status = RunRank(fn, r, *comms[r]);
    if (!status.ok()) {
      group.Abort(absl::AbortedError(
          absl::StrCat("sim: rank ", r, " failed: ", status.ToString())));
    }
    group.MarkExited(r);
    result.ranks[r] = std::move(status);
  };
  // Could not start rank r: stop the ranks that did start.
  auto fail_launch = [&](int r, const absl::Status& why, const char* what) {
    result.launch =
        absl::Status(why.code(), absl::StrCat("sim::Run: could not start the ",
                                              what, " of rank ", r, " of ",
                                              world_size, ": ", why.message()));
    group.Abort(absl::AbortedError(result.launch.ToString()));
    for (int q = r; q < world_size; ++q) group.MarkExited(q);
  };
  if (options.ranks == RankExecution::kFibers) {
    internal::FiberScheduler::Config config;
    const int workers =
        options.fiber_workers > 0
            ? options.fiber_workers
            : static_cast<int>(std::thread::hardware_concurrency());
    config.workers = std::clamp(workers, 1, world_size);
    // 0 means "the system default" for threads: 8 MiB, as there.
    config.stack_bytes =
        options.stack_bytes > 0 ? options.stack_bytes : int64_t{8} << 20;
    // Per-fiber CPU time costs two clock reads per switch: only for the
    // network clock, the one reader.
    config.track_cpu = options.clock.has_value();
    internal::FiberScheduler scheduler(config);
    for (int r = 0; r < world_size; ++r) {
      // Contiguous blocks of ranks per worker: the group's per-rank arrays
      // (posted flags, endpoints, sleeping slots) are then written by one
      // core per cache line, not by both in turn.
      const int worker = static_cast<int>(static_cast<int64_t>(r) *
                                          config.workers / world_size);
      if (absl::Status s = scheduler.Spawn([&body, r] { body(r); }, worker);
          !s.ok()) {
        fail_launch(r, s, "fiber");
        break;
      }
    }
    scheduler.Run();
  } else {
    std::vector<std::unique_ptr<internal::RankThread>> threads;
    threads.reserve(world_size);
    for (int r = 0; r < world_size; ++r) {
      absl::StatusOr<std::unique_ptr<internal::RankThread>> thread =
          internal::RankThread::Start(
              [&body, r] {
                internal::SetCurrentThreadName(comm::RankName(r));
                body(r);
              },
              options.stack_bytes);
      if (!thread.ok()) {
        fail_launch(r, thread.status(), "thread");
        break;
      }
      threads.push_back(*std::move(thread));
    }
    for (auto& t : threads) t->Join();
  }
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
