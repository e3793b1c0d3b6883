// --trace=FILE for the examples' runner (example_main): records the timeline
// (base/trace) of the run and writes one Chrome trace with a track per rank.
//
//   // before ranks: the path checked (example_main), CheckNoTraceParts(path)
//   trace::Start();
//   ... one rank per process (mpi): each rank runs, then
//       FinishRankTrace(comm, path);
//   ... else, once every rank of the process is done: WriteProcessTrace(path);
//
// Where the ranks live decides who writes: when this process hosts every rank
// (sim, nccl without a launcher), the process writes FILE once they are done;
// when each process is one rank of a launched world (mpi under mpirun, gloo
// or nccl under tandemrun/torchrun), every rank writes FILE.rank<N>, waits at
// a barrier, and rank 0 alone merges the parts into FILE (one track per rank)
// and removes them: one writer per file (the processes must share a file
// system, as the processes of one machine do; otherwise merge the parts with
// trace::MergeChromeTraces). When FILE is a device or a FIFO (written in
// place, base/output_file.h) no part files are made: rank 0 writes its own
// track to it and the other ranks write nothing.
#ifndef TANDEM_TRAIN_EXAMPLES_RUNNER_TRACE_FILE_H_
#define TANDEM_TRAIN_EXAMPLES_RUNNER_TRACE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace tandem::train {

// The part file of `rank`: "<path>.rank<rank>".
std::string TracePartPath(const std::string& path, int rank);

// Before a run whose ranks write parts: FailedPrecondition naming the first
// "<path>.rank<N>" that already exists (a user's file, or a part an earlier
// run left behind), since the run would replace and then remove it. A part
// is never removed unless this run wrote it.
absl::Status CheckNoTraceParts(const std::string& path);

// For one rank per process; collective. Writes this
// process's events to TracePartPath(path, rank) (refused, as
// CheckNoTraceParts, if that file appeared since the start), waits for every
// rank at a barrier (bounded by the engine's collective timeout), then rank 0
// merges the parts into `path` and removes them (see above for a device or
// FIFO).
absl::Status FinishRankTrace(comm::Communicator& comm, const std::string& path);

// Every rank in this process: stops recording and writes `path`.
absl::Status WriteProcessTrace(const std::string& path);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RUNNER_TRACE_FILE_H_
