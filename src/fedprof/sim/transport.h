#ifndef FEDPROF_SIM_TRANSPORT_H_
#define FEDPROF_SIM_TRANSPORT_H_

#include <string>
#include <vector>

#include "fedprof/client/client.h"

namespace fedprof {

// What the server knows about a client without seeing its data.
struct ClientInfo {
  int id = -1;
  int64_t num_samples = 0;  // |D_k|, reported by the client
  std::string data_kind;    // known only in simulation ("unknown" otherwise)
};

// How the server reaches its clients. The round loop talks only to this
// interface, so it runs the same over in-process clients (simulation, tests)
// and remote ones.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual int num_clients() const = 0;
  virtual ClientInfo Info(int client_id) const = 0;
  // Sends `instructions` to each client in `client_ids` and returns their
  // results in the same order. A client that fails yields ok == false with a
  // reason; Fit itself throws only when the transport is broken.
  virtual std::vector<FitResult> Fit(const std::vector<int>& client_ids,
                                     const FitInstructions& instructions) = 0;
};

}  // namespace fedprof

#endif  // FEDPROF_SIM_TRANSPORT_H_
