#include "fedprof/deploy/client/swarm.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "fedprof/core/log.h"
#include "fedprof/deploy/shared/tls.h"

namespace fedprof {

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.notify_one();
}

void WorkerPool::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    std::function<void()> fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

TimerThread::TimerThread() : thread_([this] { Loop(); }) {}

TimerThread::~TimerThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TimerThread::At(Clock::time_point when, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    due_.emplace(when, std::move(fn));
  }
  wake_.notify_all();
}

void TimerThread::After(double seconds, std::function<void()> fn) {
  At(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)),
     std::move(fn));
}

void TimerThread::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (due_.empty()) {
      wake_.wait(lock);
    } else if (due_.begin()->first <= Clock::now()) {
      std::function<void()> fn = std::move(due_.begin()->second);
      due_.erase(due_.begin());
      lock.unlock();
      fn();
      lock.lock();
    } else {
      wake_.wait_until(lock, due_.begin()->first);
    }
  }
}

ClientSwarm::ClientSwarm(int workers, int clients, std::string label)
    : many_(clients > 1), work_(workers), unfinished_(clients), label_(std::move(label)) {}

void ClientSwarm::Computed(int64_t round, bool trained, bool ok, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (round <= printed_) return;
  Tally& t = tallies_[round];
  ++(ok ? (trained ? t.trained : t.reported) : t.failed);
  t.slowest_s = std::max(t.slowest_s, seconds);
  PrintRoundsBefore(round);
}

void ClientSwarm::PrintRoundsBefore(int64_t round) {
  while (!tallies_.empty() && tallies_.begin()->first < round) {
    const auto& [r, t] = *tallies_.begin();
    char slowest[32];
    std::snprintf(slowest, sizeof(slowest), "%.2f", t.slowest_s);
    LogProgress(label_ + ": round " + std::to_string(r) + ": " + std::to_string(t.trained) + " trained, " +
                std::to_string(t.reported) + " reported, " + std::to_string(t.failed) + " failed (slowest " +
                slowest + " s)");
    printed_ = r;
    tallies_.erase(tallies_.begin());
  }
}

void ClientSwarm::Finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--unfinished_ == 0) finished_cv_.notify_all();
}

void ClientSwarm::AwaitAll() {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_cv_.wait(lock, [&] { return unfinished_ == 0; });
  PrintRoundsBefore(std::numeric_limits<int64_t>::max());
}

std::shared_ptr<const ClientSwarm::Roster> ClientSwarm::RosterOf(const std::string& tls_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& roster = rosters_[tls_dir];
  if (!roster) roster = std::make_shared<const Roster>(SecAggRoster(tls_dir));
  return roster;
}

}  // namespace fedprof
