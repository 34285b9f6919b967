#ifndef FEDPROF_DEPLOY_SERVER_REFUSAL_LOG_H_
#define FEDPROF_DEPLOY_SERVER_REFUSAL_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fedprof {

class RunObserver;

// The server's record of what it refused from its peers, one warning line
// per refusal, named by who sent it ("client 3", or the peer's address when
// no certificate named a client), but never a flood: after the first
// refusal of a kind from one peer, further ones within `window_s` are only
// counted, and one line sums them up when the window has passed ("client 3:
// 1998 more refusals (PushResult: unreadable result stream) in the last
// 10 s"). Thread-safe.
class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;

  // `write` takes each line (LogWarning by default); `now` is the clock
  // (tests give their own); `observer` (null: none) counts every refusal.
  explicit RefusalLog(double window_s = 10, std::function<void(const std::string&)> write = {},
                      std::function<Clock::time_point()> now = {}, RunObserver* observer = nullptr);
  explicit RefusalLog(RunObserver* observer) : RefusalLog(10, {}, {}, observer) {}
  // Writes every count still pending.
  ~RefusalLog();

  // Records a refusal of `kind` (a short fixed phrase: it groups the count)
  // from `who`; `detail` (already made printable) is logged with the first
  // of each window.
  void Refuse(const std::string& who, const std::string& kind, const std::string& detail);

  // Writes the counts of windows that have passed (all of them with
  // `everything`). Refuse calls it; a server calls it now and then so a
  // count does not wait for the next refusal.
  void Flush(bool everything = false);

  // Refusals recorded in all, logged or counted.
  int64_t total() const;

 private:
  struct Window {
    Clock::time_point start;
    int64_t more = 0;  // refusals after the logged one
  };
  void FlushLocked(bool everything, Clock::time_point now);

  const double window_s_;
  const std::function<void(const std::string&)> write_;
  const std::function<Clock::time_point()> now_;
  RunObserver* const observer_;
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Window> windows_;  // by (who, kind)
  int64_t total_ = 0;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SERVER_REFUSAL_LOG_H_
