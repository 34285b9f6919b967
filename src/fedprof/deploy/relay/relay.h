#ifndef FEDPROF_DEPLOY_RELAY_RELAY_H_
#define FEDPROF_DEPLOY_RELAY_RELAY_H_

#include <cstddef>
#include <functional>
#include <string>

#include "fedprof/protocol/messages.h"

namespace fedprof {

class RunObserver;

struct GrpcRelayOptions {
  std::string server;   // the server's HOST:PORT
  std::string listen = "127.0.0.1:50052";  // where the relay's clients connect; port 0: any free one
  // Directory of ca.crt, relay-<id>.crt and relay-<id>.key (scripts/make-certs.sh
  // with RELAYS=R): the relay's certificate towards the server and towards
  // its clients. Empty: plaintext (loopback experiments only).
  std::string tls_dir;
  int id = 0;               // relay-<id>
  double give_up_s = 300;   // how long to keep trying to reach the server
};

// Why a result the relay's client sent cannot count, or "" (the checks the
// server makes of a model: Server::Validate). `trained`: a model is expected.
using RelayCheck = std::function<std::string(const FitResult& result, size_t num_params, bool trained)>;

// Serves as relay `id` between the server and the clients that register
// with the relay (proto/federation.proto), until the server says the run is
// done: tells the server who its clients are every heartbeat, takes their
// tasks in batches and hands them out, checks each result with `check` and
// as the server's transport checks a client's, forwards it without its
// model for the server's verdict, and sends up one exact partial sum of the
// accepted models per batch (aggregation/model_sum.h: a tree of relays
// gives the flat server's model bit for bit). Throws fedprof::Error when the
// server refuses the relay or stays unreachable for give_up_s. `observer`
// (null: none) hears of its clients, their results and its refusals.
void RunGrpcRelay(const GrpcRelayOptions& options, const RelayCheck& check,
                  RunObserver* observer = nullptr);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_RELAY_RELAY_H_
