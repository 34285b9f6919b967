#ifndef FEDPROF_DEPLOY_CLIENT_CLIENT_H_
#define FEDPROF_DEPLOY_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fedprof/data/feature_scaling.h"
#include "fedprof/deploy/client/options.h"
#include "fedprof/models/spec.h"
#include "fedprof/protocol/messages.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {


// What a client learns at each registration: the model the server trains,
// its size, and the scaling of tabular features (empty for images).
struct ServerSetup {
  ModelSpec model;
  int64_t num_params = 0;
  FeatureScaling features;
  std::string run_id;  // the server's run, as it states it (RegisterReply.run_id)
};

// What a client computes. `prepare` is called after each registration with
// the server's setup, before any task; `fit` computes a task. Both run on a
// worker thread and may throw (the client ends with that error).
struct GrpcClientWork {
  std::function<void(const ServerSetup& setup)> prepare;
  std::function<FitResult(const FitInstructions&)> fit;
};

// The client side of the deployment protocol (proto/federation.proto), for
// clients[i] with work[i], all in this process: each registers (again
// whenever the server has forgotten it, e.g. after a restart), sends
// heartbeats, pulls tasks, computes them and pushes the results, until the
// server says the run is done. Each client has its own channel and TLS
// identity; all run on gRPC's callback API, so a client waiting for a task,
// a reply or the end of its back-off holds no thread, and `workers` threads
// (at least 1) compute for all of them. Returns once every client has
// ended: for each, the error that ended it, or "" when the server said the
// run is done (of several clients, each also logs its error as it ends).
// A client ends with an error when the server refuses it
// (another protocol version, a certificate of another client, an
// impossible claim), stays unreachable for give_up_s, or its work throws.
std::vector<std::string> RunGrpcClients(const std::vector<GrpcClientOptions>& clients,
                                        const std::vector<GrpcClientWork>& work, int workers);

// One client (RunGrpcClients of one, one worker); throws fedprof::Error
// with the error that ended it.
void RunGrpcClient(const GrpcClientOptions& options, const std::function<void(const ServerSetup& setup)>& prepare,
                   const std::function<FitResult(const FitInstructions&)>& fit);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_CLIENT_H_
