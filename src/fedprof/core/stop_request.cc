#include "fedprof/core/stop_request.h"

#include <atomic>

namespace fedprof {
namespace {

std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "a signal handler sets it");

}  // namespace

void RequestStopAtRoundEnd() { requested.store(true); }
bool StopAtRoundEndRequested() { return requested.load(); }

}  // namespace fedprof
