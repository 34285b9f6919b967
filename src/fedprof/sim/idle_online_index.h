#ifndef FEDPROF_SIM_IDLE_ONLINE_INDEX_H_
#define FEDPROF_SIM_IDLE_ONLINE_INDEX_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "fedprof/selection/selector.h"
#include "fedprof/sim/availability.h"

namespace fedprof {

// The idle online clients of a simulated population, kept as virtual time
// passes and clients start and finish, for an asynchronous run that refills
// its free places at every finish (server/buffered.cc): a refill among N
// clients then costs O(c log N) for the c availability changes since the
// last one and O(log N) per client drawn by rank, where a pass over the
// population costs O(N) (docs/scale.md). Each client's next change sits in
// a min-heap (16 bytes) and idle ∧ online is a Fenwick tree of counts over
// ids (4 bytes), so a client costs 21 bytes here (with its flags) beside its
// availability model's own. What it answers equals a pass over the
// population at the same virtual time.
class IdleOnlineIndex final : public RankedClients {
 public:
  // `clients`: every client, client k at index k. `availability`: when
  // each is online (null: always), asked only at times that do not
  // decrease. Neither is owned; both outlive the index.
  IdleOnlineIndex(const std::vector<ClientInfo>& clients, Availability* availability);
  IdleOnlineIndex(std::vector<ClientInfo>&& clients, Availability* availability) = delete;

  // Brings the index to virtual time `t` (not before the last one).
  void AdvanceTo(double t);
  // A client starts (true) or stops (false) training, or is held back.
  void SetBusy(int id, bool busy);

  // The idle online clients: how many, the one of rank r (increasing id).
  int size() const override { return idle_online_; }
  ClientInfo At(int rank) const override;
  // All of them, increasing id: one pass over the population's flags.
  std::vector<ClientInfo> Idle() const;

  // The clients online, busy or not, and their samples (|D| of FedBuff's
  // full participation).
  int online() const { return online_; }
  int64_t online_samples() const { return online_samples_; }

 private:
  static constexpr uint8_t kOnline = 1, kBusy = 2;
  double Refresh(int id, double t);                   // asks the model at t; returns its next change
  void ReplaceEarliest(std::pair<double, int> next);  // the heap's top, sifted down
  void Count(int id, int delta);   // idle ∧ online changed by delta at id

  const std::vector<ClientInfo>& clients_;
  Availability* availability_;
  std::vector<uint8_t> flags_;
  std::vector<int32_t> tree_;                 // Fenwick tree, 1-based, of idle ∧ online
  std::vector<std::pair<double, int>> heap_;  // (next change, id), earliest first
  int idle_online_ = 0, online_ = 0;
  int64_t online_samples_ = 0;
  double now_ = 0;
  bool started_ = false;
};

}  // namespace fedprof

#endif  // FEDPROF_SIM_IDLE_ONLINE_INDEX_H_
