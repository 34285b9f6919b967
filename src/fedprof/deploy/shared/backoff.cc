#include "fedprof/deploy/shared/backoff.h"

#include <algorithm>

namespace fedprof {

Backoff::Backoff(double give_up_s, uint64_t seed)
    : give_up_s_(give_up_s), rng_(seed), last_contact_(Clock::now()) {}

void Backoff::Contact(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_contact_ = now;
  backoff_s_ = 0;
}

Backoff::Step Backoff::Failed(double heartbeat_s, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  Step step;
  step.silent_s = std::chrono::duration<double>(now - last_contact_).count();
  if (step.silent_s > give_up_s_) {
    step.give_up = true;
    return step;
  }
  step.first = backoff_s_ == 0;
  // The longest pause follows the heartbeat cadence the server asked for.
  backoff_s_ = std::clamp(backoff_s_ * 2, 0.25, std::clamp(5 * heartbeat_s, 1.0, 10.0));
  step.wait_s = backoff_s_ * std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
  return step;
}

std::string GivingUp(const std::string& why, double silent_s) {
  return why + "; no answer for " + std::to_string(static_cast<int>(silent_s)) +
         " s, giving up (--give-up-after)";
}

}  // namespace fedprof
