#ifndef FEDPROF_RUN_RUN_H_
#define FEDPROF_RUN_RUN_H_

// The server side of a run, the same for every way of running it:
// `simulate` (clients in this process), `launch` (clients on other ranks)
// and `server` (clients on other machines over gRPC). Each builds its
// RunPlan (run/plan.h) and its Transport, then calls RunRounds.

#include <string>

#include "fedprof/run/plan.h"
#include "fedprof/server/server.h"

namespace fedprof {

class RunObserver;
class Transport;

// Runs rounds state.round + 1 .. rounds of `plan` over `transport`: loads
// the transport's saved state (resume), opens it, runs the round loop with a
// RunRecorder writing into `out_dir` after every round, then writes the
// final outputs and closes the transport. `resume` keeps the per-round rows
// up to the checkpoint. `observer` (null: none) hears of the run, its rounds
// and their phases and results.
void RunRounds(RunPlan& plan, const std::string& out_dir, ServerState state, bool resume,
               Transport& transport, RunObserver* observer = nullptr);

}  // namespace fedprof

#endif  // FEDPROF_RUN_RUN_H_
