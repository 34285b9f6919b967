#include "fedprof/transport/transport.h"

#include "fedprof/core/error.h"

namespace fedprof {

std::vector<ClientDescription> Transport::Describe() {
  std::vector<ClientDescription> rows(static_cast<size_t>(num_clients()));
  for (const ClientInfo& info : Available()) {
    if (info.id < 0 || info.id >= num_clients()) continue;
    ClientDescription& row = rows[static_cast<size_t>(info.id)];
    row.size = info.num_samples;
    row.round_s = info.expected_time_s > 0 ? info.expected_time_s : 0;
  }
  return rows;
}

void Transport::LaunchTasks(const std::vector<ClientInstructions>&) {
  throw Error("this transport runs tasks in rounds only (Fit)");
}

bool Transport::AwaitResult(const ResultSink&) {
  throw Error("this transport runs tasks in rounds only (Fit)");
}

}  // namespace fedprof
