#ifndef FEDPROF_CORE_THREAD_POOL_H_
#define FEDPROF_CORE_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fedprof {

// A fixed set of worker threads that run one parallel loop at a time.
// ParallelFor hands out indices dynamically; callers make results independent
// of which worker ran which index (each writes its own slot). Not reentrant:
// one ParallelFor at a time per pool.
class ThreadPool {
 public:
  // num_threads <= 0 uses std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(index, worker) for index in [0, n); worker in [0, size()) names
  // the thread (the caller is worker 0), so callers can keep per-worker
  // scratch state. Rethrows the first exception after all indices finish.
  void ParallelFor(int64_t n, const std::function<void(int64_t, int)>& fn);

 private:
  void WorkerLoop(int worker);
  void RunTasks(int worker);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace fedprof

#endif  // FEDPROF_CORE_THREAD_POOL_H_
