#include "fedprof/sim/idle_online_index.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

IdleOnlineIndex::IdleOnlineIndex(const std::vector<ClientInfo>& clients, Availability* availability)
    : clients_(clients),
      availability_(availability),
      flags_(clients_.size(), 0),
      tree_(clients_.size() + 1, 0) {
  for (size_t k = 0; k < clients_.size(); ++k) {
    if (clients_[k].id != static_cast<int>(k)) {
      throw Error("idle online index: client " + std::to_string(clients_[k].id) + " at position " +
                  std::to_string(k));
    }
  }
}

void IdleOnlineIndex::Count(int id, int delta) {
  idle_online_ += delta;
  for (size_t i = static_cast<size_t>(id) + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += delta;
}

double IdleOnlineIndex::Refresh(int id, double t) {
  bool online = true;
  double until = INFINITY;
  if (availability_) {
    const Availability::State s = availability_->At(id, t);
    online = s.online;
    until = s.until;
  }
  uint8_t& f = flags_[static_cast<size_t>(id)];
  if (online != ((f & kOnline) != 0)) {
    f ^= kOnline;
    const int delta = online ? 1 : -1;
    online_ += delta;
    online_samples_ += delta * clients_[static_cast<size_t>(id)].num_samples;
    if (!(f & kBusy)) Count(id, delta);
  }
  return until;
}

void IdleOnlineIndex::ReplaceEarliest(std::pair<double, int> next) {
  // One sift down where popping and pushing would sift twice; the order is
  // std::push_heap's with std::greater (a parent never after its children).
  size_t i = 0;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= heap_.size()) break;
    if (child + 1 < heap_.size() && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < next)) break;
    heap_[i] = heap_[child];
    i = child;
  }
  heap_[i] = next;
}

void IdleOnlineIndex::AdvanceTo(double t) {
  if (started_ && t < now_) {
    throw Error("idle online index: virtual time " + FormatDouble(t) + " s is before " + FormatDouble(now_) +
                " s");
  }
  now_ = t;
  if (!started_) {
    started_ = true;
    for (size_t k = 0; k < clients_.size(); ++k) {
      const double until = Refresh(static_cast<int>(k), t);
      if (std::isfinite(until)) heap_.emplace_back(until, static_cast<int>(k));
    }
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
    return;
  }
  while (!heap_.empty() && heap_.front().first <= t) {
    const int id = heap_.front().second;
    const double until = Refresh(id, t);
    if (std::isfinite(until)) {
      ReplaceEarliest({until, id});
    } else {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      heap_.pop_back();
    }
  }
}

void IdleOnlineIndex::SetBusy(int id, bool busy) {
  uint8_t& f = flags_.at(static_cast<size_t>(id));
  if (busy == ((f & kBusy) != 0)) return;
  f ^= kBusy;
  if (f & kOnline) Count(id, busy ? -1 : 1);
}

ClientInfo IdleOnlineIndex::At(int rank) const {
  if (rank < 0 || rank >= idle_online_) {
    throw Error("idle online index: rank " + std::to_string(rank) + " of " + std::to_string(idle_online_));
  }
  // The smallest position whose prefix count exceeds `rank`.
  size_t pos = 0;
  int left = rank;
  size_t step = 1;
  while (step * 2 < tree_.size()) step *= 2;
  for (; step > 0; step /= 2) {
    if (pos + step < tree_.size() && tree_[pos + step] <= left) {
      pos += step;
      left -= tree_[pos];
    }
  }
  return clients_[pos];  // tree_ is 1-based: its position pos + 1 is clients_[pos]
}

std::vector<ClientInfo> IdleOnlineIndex::Idle() const {
  std::vector<ClientInfo> idle;
  idle.reserve(static_cast<size_t>(idle_online_));
  for (size_t k = 0; k < clients_.size(); ++k) {
    if (flags_[k] == kOnline) idle.push_back(clients_[k]);
  }
  return idle;
}

}  // namespace fedprof
