#include "fedprof/deploy/client_swarm.h"

#include <algorithm>
#include <utility>

#include "fedprof/deploy/tls.h"

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

ClientSwarm::ClientSwarm(int workers, int clients)
    : many_(clients > 1), work_(workers), unfinished_(clients) {}

void ClientSwarm::Finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--unfinished_ == 0) finished_cv_.notify_all();
}

void ClientSwarm::AwaitAll() {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_cv_.wait(lock, [&] { return unfinished_ == 0; });
}

std::shared_ptr<const ClientSwarm::Roster> ClientSwarm::RosterOf(const std::string& tls_dir) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& roster = rosters_[tls_dir];
  if (!roster) roster = std::make_shared<const Roster>(SecAggRoster(tls_dir));
  return roster;
}

}  // namespace fedprof
