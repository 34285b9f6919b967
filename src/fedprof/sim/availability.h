#ifndef FEDPROF_SIM_AVAILABILITY_H_
#define FEDPROF_SIM_AVAILABILITY_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"

namespace fedprof {

// When simulated clients are online, in the cost model's virtual time
// (availability.*; docs/availability.md). A client online at a round's start
// can be selected; one whose online period ends before it would finish is
// lost for the round.
class Availability {
 public:
  virtual ~Availability() = default;
  // Whether a client is online at a virtual time, and until when the answer
  // holds: the first later time at which it may change (INFINITY: never).
  struct State {
    bool online = false;
    double until = INFINITY;
  };
  // Client `client`'s state at virtual time t (seconds). Not thread-safe;
  // cheapest when each client's t does not decrease from call to call.
  virtual State At(int client, double t) = 0;
  // The end of client `client`'s online period that holds t, or -1 when it
  // is offline at t.
  double OnlineUntil(int client, double t) {
    const State s = At(client, t);
    return s.online ? s.until : -1;
  }
};

// Each client alternates online and offline periods of exponential length
// (means online_mean_s and offline_mean_s), starting online with
// probability online_mean / (online_mean + offline_mean), so that this share
// is online at any time. Every period is drawn from (seed, client, its
// index) alone: a client costs 24 bytes (its current period).
class OnOffAvailability final : public Availability {
 public:
  OnOffAvailability(int num_clients, double online_mean_s, double offline_mean_s, uint64_t seed);
  State At(int client, double t) override;

 private:
  struct Period {
    double start = 0, end = -1;  // end < start: not drawn yet
    uint32_t index = 0;
    bool online = false;
  };
  double Draw(int client, uint32_t index, bool online) const;

  double online_mean_s_, offline_mean_s_;
  uint64_t seed_;
  std::vector<Period> periods_;
};

// A day's rhythm: virtual time is cut into slots of slot_s; in each, client
// k is online with probability p(τ) = min(1, share · (1 + A · cos(2π τ /
// day_s))), τ the client's local time of day at the slot's start (its time
// zone: an offset drawn uniformly from [0, time_zones_h) hours), so the
// share online peaks at local midnight (devices charging overnight) and is
// lowest at noon; each slot is drawn from (seed, client, slot) alone. With
// time_zones_h = 24 the population's share is flat; with 0 everyone shares
// one clock and the share online swings between share · (1 ± A). A client
// costs 24 bytes (its current run of online or offline slots); runs are cut
// at every 65,536th slot.
struct DiurnalShape {
  double share = 0.5, amplitude = 0.8, time_zones_h = 0, slot_s = 600, day_s = 86400;
};
class DiurnalAvailability final : public Availability {
 public:
  DiurnalAvailability(int num_clients, const DiurnalShape& shape, uint64_t seed);
  State At(int client, double t) override;
  // The chance that `client` is online in slot `slot`.
  double OnlineChance(int client, int64_t slot) const;

 private:
  struct Run {
    int64_t first = 0, end = -1;  // slots [first, end) alike; end < first: none found yet
    bool online = false;
  };
  bool OnlineIn(int client, int64_t slot) const;

  DiurnalShape shape_;
  uint64_t seed_;
  std::vector<Run> runs_;
};

// An online interval [start, end) of virtual seconds.
struct OnlineInterval {
  double start = 0, end = 0;
};

// A trace file: a header line "client,start,end", then one online interval
// per line (client id in [0, num_clients), 0 <= start < end <= 1e15
// seconds); blank lines and lines starting with '#' are skipped. A client's
// overlapping or touching intervals merge; a client the trace never names
// is never online. Throws fedprof::Error naming `name`, the line and what is
// wrong.
std::vector<std::vector<OnlineInterval>> ParseAvailabilityTrace(const std::string& text,
                                                                const std::string& name, int num_clients);

class TraceAvailability final : public Availability {
 public:
  explicit TraceAvailability(std::vector<std::vector<OnlineInterval>> intervals)
      : intervals_(std::move(intervals)) {}
  State At(int client, double t) override;

 private:
  std::vector<std::vector<OnlineInterval>> intervals_;  // by client, sorted, disjoint
};

// The availability.* options' model, or null for availability.kind = always.
std::unique_ptr<Availability> MakeAvailability(const RunOptions::Availability& options, int64_t seed,
                                               int num_clients);

}  // namespace fedprof

#endif  // FEDPROF_SIM_AVAILABILITY_H_
