#ifndef FEDPROF_RUN_DEPLOYMENT_H_
#define FEDPROF_RUN_DEPLOYMENT_H_

// Federated training with the clients on other machines: `fedprof server`
// and `fedprof client` over gRPC (deploy/server/grpc_transport.h,
// deploy/client/client.h), secured by mutual TLS unless told otherwise.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/run/run_dir.h"

namespace fedprof {

class RunObserver;

// How the server is reached and secured (not part of the run's config, so
// that a resumed server may listen elsewhere).
struct ServeOptions {
  std::string listen = "127.0.0.1:50051";
  std::string tls_dir;    // ca.crt, server.crt, server.key (scripts/make-certs.sh)
  bool insecure = false;  // plaintext; refused unless `listen` is a loopback address
  // A federation's access list (deploy/server/access_list.h): the nodes it
  // serves, each under its enrolled certificate. Empty: every client the CA
  // certified.
  std::string access_file;
  // The config is another party's (a federation's run): every file it names
  // lies in one of `data_roots` (config/paths.h), or the run is refused
  // before anything is read; and no error line quotes a file's content.
  bool foreign_config = false;
  std::vector<std::string> data_roots;
};

// Runs the config's rounds with its clients connecting over the network,
// writing the outputs `simulate` writes (config.toml, metrics.csv with
// measured times, clients.csv, summary.json, checkpoint.bin, plots) into
// `out_dir`. Waits (deploy.start_timeout_s at most) for deploy.min_clients
// clients before round 1, and tells the clients when the run is over.
// `observer` (null: none) watches the run and the transport. A run already
// in `out_dir` is refused, or replaced (`existing`).
void RunServer(const Config& config, const std::string& out_dir, const ServeOptions& serve,
               RunObserver* observer = nullptr, ExistingRun existing = ExistingRun::kRefuse);

// Continues the server run in `out_dir` (after a crash or kill -9) from its
// last checkpoint; clients reconnect by themselves. `overrides` are --set
// assignments: rounds, threads, report.progress and deploy.* may change.
void ResumeServer(const std::string& out_dir, const std::vector<std::string>& overrides,
                  const ServeOptions& serve, RunObserver* observer = nullptr);

struct ClientOptions {
  std::string server;     // HOST:PORT
  int relay = -1;         // >= 0: `server` is this relay (fedprof client --relay R)
  // Client `id`, or (last_id >= 0, fedprof client --ids) clients id ..
  // last_id in this process, each with its own channel, TLS identity and
  // data; for load tests.
  int id = -1;
  int last_id = -1;
  // For load tests of the server: answer a task with the model it brought,
  // training nothing and sending nothing else a task asks for (profiles,
  // evaluation).
  bool fit_none = false;
  std::string tls_dir;    // ca.crt, client-<id>.crt, client-<id>.key
  bool insecure = false;  // plaintext; refused unless `server` is a loopback address
  // Empty: the client holds partition `id` of the config's data with its
  // data-quality kind, exactly simulated client `id`. Else the client's own
  // files: train-images-idx3-ubyte[.gz] + train-labels-idx1-ubyte[.gz], or
  // train.csv (columns as data.targets names them).
  std::string data_dir;
  double give_up_s = 300;  // how long to keep trying to reach the server
  // Where a client keeps its client algorithm's state between rounds and
  // restarts (client-<id>.<algorithm>.state); empty: the tls_dir, or
  // memory only without one.
  std::string state_dir;
  std::function<bool()> withdrawn;  // true: stop trying at once (GrpcClientOptions)
  double speed_ghz = 0;    // optional device figures stated at registration
  double bandwidth_mhz = 0;
  // Asked before each training task of client `id`: "" trains it, else why
  // it will not (a node's rounds a day), sent as the task's failure.
  std::function<std::string(int id)> admit_training;
};

// Serves the server's tasks until it says the run is done. Raw data never
// leaves this process; profiles are computed here. With a range of ids,
// every client runs on threads of its own; the call throws when any of
// them ended with an error (each is logged with its id).
void RunClient(const Config& config, const ClientOptions& options);

struct RelayOptions {
  std::string server;  // the server's HOST:PORT
  std::string listen = "127.0.0.1:50052";  // where its clients connect
  int id = 0;          // relay-<id>: its certificate's name
  std::string tls_dir;    // ca.crt, relay-<id>.crt, relay-<id>.key
  bool insecure = false;  // plaintext; refused unless both addresses are loopback
  double give_up_s = 300;
};

// Relays between the server and the clients that connect to it
// (deploy/relay/relay.h), until the server says the run is done. Needs no
// config: the server says what its clients train. `observer` (null: none)
// hears of its clients and their results.
void RunRelay(const RelayOptions& options, RunObserver* observer = nullptr);

// "A" or "A-B" (decimal, A <= B) as [first, last]; throws fedprof::Error.
std::pair<int, int> ParseIdRange(const std::string& text);

}  // namespace fedprof

#endif  // FEDPROF_RUN_DEPLOYMENT_H_
