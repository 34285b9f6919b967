#ifndef FEDPROF_CORE_STOP_REQUEST_H_
#define FEDPROF_CORE_STOP_REQUEST_H_

namespace fedprof {

// A request that the run in progress end after the round it is in: what a
// `fedprof server` does on SIGTERM (a federation's operator stopping the
// run). The round loop asks after each round (run/run.cc); the run then
// ends as a finished one does, its outputs written and its clients told,
// having run fewer rounds. Safe to call from a signal handler.
void RequestStopAtRoundEnd();
bool StopAtRoundEndRequested();

}  // namespace fedprof

#endif  // FEDPROF_CORE_STOP_REQUEST_H_
