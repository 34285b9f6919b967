#ifndef FEDPROF_TRANSPORT_AVAILABILITY_H_
#define FEDPROF_TRANSPORT_AVAILABILITY_H_

#include <memory>
#include <vector>

#include "fedprof/sim/availability.h"
#include "fedprof/transport/forwarding.h"

namespace fedprof {

// Simulated clients that come and go (docs/availability.md), around a
// simulation's transport (every rank's clients under launch): Available
// names only the clients online at the round's virtual start time; a task
// whose client goes offline before start + its round time (the cost model's,
// ClientInfo::expected_time_s) is not trained and comes back timed out. With
// over-commitment (`overcommit` > 1, the server asking ceil(overcommit K)
// clients, K = `clients_per_round`) only the first K results to finish in
// virtual time (ties by id) are handed on; the later ones come back timed
// out, their energy counted but not their time. Results are then handed
// over in that order.
class AvailabilityTransport final : public ForwardingTransport {
 public:
  // `availability` null: every client always online.
  AvailabilityTransport(Transport& inner, std::unique_ptr<Availability> availability, double overcommit,
                        int clients_per_round);

  void SetVirtualTime(double t_s) override;
  std::vector<ClientInfo> Available() override;
  std::vector<ClientInfo> AvailableOrWait(const std::function<bool(int)>&) override { return Available(); }
  const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) override;
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;

 private:
  void NoteExpectedTimes(const std::vector<ClientInfo>& clients);  // into expected_s_

  std::unique_ptr<Availability> availability_;
  double overcommit_;
  int clients_per_round_;
  double now_s_ = 0;
  std::vector<double> expected_s_;  // by client id, from the inner transport
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_AVAILABILITY_H_
