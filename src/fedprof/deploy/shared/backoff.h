#ifndef FEDPROF_DEPLOY_SHARED_BACKOFF_H_
#define FEDPROF_DEPLOY_SHARED_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>

namespace fedprof {

// When a caller of the server (a client, a relay) tries again after a
// failed call, and when it stops trying. The waits double from 0.25 s up to
// 5 of the server's heartbeat intervals (at least 1 s, at most 10 s), each
// drawn from the upper half of its span so that callers that failed
// together do not retry in step; any answer from the server starts them
// afresh. Once the server has been silent for `give_up_s`, there is no
// next try. Thread-safe.
class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  // The server counts as heard from now.
  explicit Backoff(double give_up_s, uint64_t seed = std::random_device{}());

  // The server answered.
  void Contact(Clock::time_point now = Clock::now());

  struct Step {
    bool give_up = false;  // silent for over give_up_s: no next try
    bool first = false;    // the first failure since the server last answered
    double wait_s = 0;     // before the next try
    double silent_s = 0;   // since the server last answered
  };
  // A try failed; `heartbeat_s` is the interval the server asked for.
  Step Failed(double heartbeat_s, Clock::time_point now = Clock::now());

 private:
  const double give_up_s_;
  std::mutex mutex_;
  std::mt19937_64 rng_;
  Clock::time_point last_contact_;
  double backoff_s_ = 0;  // the current span; 0 after an answer
};

// What a caller that gives up says: `why` it failed and for how long the
// server has been silent.
std::string GivingUp(const std::string& why, double silent_s);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SHARED_BACKOFF_H_
