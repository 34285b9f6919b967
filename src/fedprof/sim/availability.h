#ifndef FEDPROF_SIM_AVAILABILITY_H_
#define FEDPROF_SIM_AVAILABILITY_H_

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
  // The end of client `client`'s online period that holds virtual time t
  // (seconds), or -1 when it is offline at t. Not thread-safe; cheapest when
  // each client's t does not decrease from call to call.
  virtual double OnlineUntil(int client, double t) = 0;
};

// Each client alternates online and offline periods of exponential length
// (means online_mean_s and offline_mean_s), starting online with
// probability online_mean / (online_mean + offline_mean), so that this share
// is online at any time. Every period is drawn from (seed, client, its
// index) alone: a client costs 24 bytes (its current period).
class OnOffAvailability final : public Availability {
 public:
  OnOffAvailability(int num_clients, double online_mean_s, double offline_mean_s, uint64_t seed);
  double OnlineUntil(int client, double t) override;

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
  double OnlineUntil(int client, double t) override;

 private:
  std::vector<std::vector<OnlineInterval>> intervals_;  // by client, sorted, disjoint
};

// The availability.* options' model, or null for availability.kind = always.
std::unique_ptr<Availability> MakeAvailability(const RunOptions::Availability& options, int64_t seed,
                                               int num_clients);

}  // namespace fedprof

#endif  // FEDPROF_SIM_AVAILABILITY_H_
