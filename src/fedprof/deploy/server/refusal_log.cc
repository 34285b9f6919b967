#include "fedprof/deploy/server/refusal_log.h"

#include "fedprof/core/log.h"
#include "fedprof/core/run_observer.h"

namespace fedprof {

RefusalLog::RefusalLog(double window_s, std::function<void(const std::string&)> write,
                       std::function<Clock::time_point()> now, RunObserver* observer)
    : window_s_(window_s),
      write_(write ? std::move(write) : [](const std::string& line) { LogWarning(line); }),
      now_(now ? std::move(now) : [] { return Clock::now(); }),
      observer_(observer) {}

RefusalLog::~RefusalLog() { Flush(/*everything=*/true); }

void RefusalLog::Refuse(const std::string& who, const std::string& kind, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = now_();
  FlushLocked(false, now);
  ++total_;
  if (observer_) observer_->AddTransportRefusal(who, kind);
  const auto key = std::make_pair(who, kind);
  const auto it = windows_.find(key);
  if (it != windows_.end()) {
    ++it->second.more;
    return;
  }
  windows_[key] = Window{now, 0};
  write_(who + " refused: " + detail);
}

void RefusalLog::Flush(bool everything) {
  std::lock_guard<std::mutex> lock(mutex_);
  FlushLocked(everything, now_());
}

int64_t RefusalLog::total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_;
}

void RefusalLog::FlushLocked(bool everything, Clock::time_point now) {
  const auto window = std::chrono::duration<double>(window_s_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (!everything && now - it->second.start < window) {
      ++it;
      continue;
    }
    if (it->second.more > 0) {
      const double span = std::chrono::duration<double>(now - it->second.start).count();
      write_(it->first.first + ": " + std::to_string(it->second.more) + " more refusals (" +
             it->first.second + ") in the last " + std::to_string(static_cast<int64_t>(span + 0.5)) +
             " s");
    }
    it = windows_.erase(it);
  }
}

}  // namespace fedprof
