#ifndef FEDPROF_DEPLOY_SERVER_OPTIONS_H_
#define FEDPROF_DEPLOY_SERVER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fedprof/data/feature_scaling.h"
#include "fedprof/models/spec.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// How the deployment's server runs (fedprof server; the [deploy] options).
struct GrpcServerOptions {
  std::string listen = "127.0.0.1:50051";  // HOST:PORT; port 0 picks a free one
  // Directory of ca.crt, server.crt and server.key (scripts/make-certs.sh):
  // mutual TLS, the client id taken from the client's certificate. Empty:
  // plaintext, ids as claimed (loopback experiments only).
  std::string tls_dir;
  int num_clients = 0;  // client ids are 0 .. num_clients - 1
  ModelSpec model;      // what clients build
  int64_t num_params = 0;
  FeatureScaling features;  // tabular data: what a client's own table goes through
  double heartbeat_s = 2;
  double heartbeat_timeout_s = 10;  // silent this long = gone
  double round_timeout_s = 600;
  size_t chunk_bytes = size_t{1} << 20;
  int64_t max_samples = 1000000;  // largest sample count a client may claim
  // Open waits for this many registered clients (0: all num_clients), at
  // most start_timeout_s.
  int min_clients = 0;
  double start_timeout_s = 300;
  // Most clients connected at once (0: no bound beyond num_clients); a
  // registration past it is refused as RESOURCE_EXHAUSTED, which clients
  // retry after a jittered back-off.
  int max_clients = 0;
  // The certificate the server presents: DIR/<cert_name>.crt and .key
  // (a relay presents its own, relay-<r>).
  std::string cert_name = "server";
  // Why relays may not join this run (its aggregation needs every model),
  // or "": they may.
  std::string relays_refused;
  // Secure aggregation of the clients' models (docs/secagg.md), or none:
  // models in the clear. Each round of its sessions waits at most
  // secagg_phase_timeout_s for the clients' messages.
  std::optional<SecureAggregationOptions> secure_aggregation;
  double secagg_phase_timeout_s = 60;
  // A federation's access list (deploy/server/access_list.h): which client
  // certificates are served. Empty: every certificate of the CA.
  std::string access_file;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SERVER_OPTIONS_H_
