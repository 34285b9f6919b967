// fedprof server / fedprof client: federated training with the clients on
// other machines, over gRPC with mutual TLS.
#include <signal.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/stop_request.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/privacy/noise_source.h"
#include "fedprof/run/deployment.h"
#include "tools/fedprof/commands.h"

namespace fedprof::cli {
namespace {

struct ServerArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  std::string resume;
  bool overwrite = false;
  ServeOptions serve;
  MonitorArgs monitor;
};

struct ClientArgs {
  std::string config;
  std::vector<std::string> sets;
  ClientOptions client;
  std::string ids;  // --ids A-B
  std::string fit = "train";
};

void AddSecurity(CLI::App* sub, std::string* tls_dir, bool* insecure, const std::string& files) {
  sub->add_option("--tls-dir", *tls_dir, "Mutual TLS: directory with " + files +
                                             " (scripts/make-certs.sh DIR N writes them)");
  sub->add_flag("--insecure", *insecure, "No TLS, for loopback experiments only");
}

}  // namespace

Runner AddServer(CLI::App& app) {
  auto args = std::make_shared<ServerArgs>();
  CLI::App* sub = app.add_subcommand(
      "server", "Run federated training with clients on other machines (gRPC, mutual TLS)");
  sub->add_option("--config", args->config, "Experiment config (TOML)");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--listen", args->serve.listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--out", args->out, "Output directory (default runs/<config>-server-<time>)");
  CLI::Option* resume =
      sub->add_option("--resume", args->resume, "Continue the server run in this output directory");
  sub->add_flag("--overwrite", args->overwrite, "Replace the run already in --out (refused without it)")
      ->excludes(resume);
  AddSecurity(sub, &args->serve.tls_dir, &args->serve.insecure, "ca.crt, server.crt, server.key");
  sub->add_option("--access", args->serve.access_file,
                  "A federation's list of the nodes it serves (fedprof federation serve gives it)");
  sub->add_flag("--foreign-config", args->serve.foreign_config,
                "The config is another party's (fedprof federation serve gives it): it may name files only "
                "under a --data-root, and no error line quotes a file's content");
  sub->add_option("--data-root", args->serve.data_roots,
                  "With --foreign-config: a directory whose files the config may name (repeatable)");
  AddMonitorOptions(sub, &args->monitor);
  sub->footer("Clients: fedprof client --server HOST:PORT --id K --config FILE. Options: fedprof "
              "options (deploy.*). SIGTERM: stop after the round in progress");
  return [args] {
    // SIGTERM (a federation's operator stopping the run, or a service
    // manager): the run ends after its round in progress, its clients told.
    struct sigaction stop {};
    stop.sa_handler = [](int) { RequestStopAtRoundEnd(); };
    stop.sa_flags = SA_RESTART;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGTERM, &stop, nullptr);
    // Off loopback the monitor speaks HTTPS with the server's own certificate.
    MonitorArgs monitor = args->monitor;
    if (monitor.tls_dir.empty() && !args->serve.insecure && !monitor.token_file.empty()) {
      monitor.tls_dir = args->serve.tls_dir;
    }
    const std::unique_ptr<RunMonitor> monitor_server = StartMonitor(monitor, "server");
    if (!args->resume.empty()) {
      if (!args->config.empty() || !args->out.empty()) {
        throw Error("--resume DIR: takes its config from DIR; drop --config and --out");
      }
      ResumeServer(args->resume, args->sets, args->serve, monitor_server.get());
      std::printf("outputs in %s\n", args->resume.c_str());
      return;
    }
    Config config = Config::Load(args->config, args->sets);
    const std::string out = args->out.empty() ? DefaultOutDir(args->config, "server") : args->out;
    RunServer(config, out, args->serve, monitor_server.get(),
              args->overwrite ? ExistingRun::kReplace : ExistingRun::kRefuse);
    std::printf("outputs in %s (metrics.csv, clients.csv, summary.json, config.toml)\n",
                out.c_str());
  };
}

Runner AddClient(CLI::App& app) {
  auto args = std::make_shared<ClientArgs>();
  CLI::App* sub = app.add_subcommand("client", "Serve a federated-training server as client K");
  sub->add_option("--server", args->client.server, "The server's HOST:PORT, or a relay's (with --relay)")
      ->required();
  sub->add_option("--relay", args->client.relay,
                  "--server is relay R: under TLS the client accepts only relay R's certificate there (and "
                  "without --relay only the server's)");
  CLI::Option* id =
      sub->add_option("--id", args->client.id, "This client's id (its certificate's CN client-K)");
  CLI::Option* ids = sub->add_option(
      "--ids", args->ids,
      "Clients A..B in this process (A-B), each with its own channel, certificate and data: for "
      "load tests of a server");
  id->excludes(ids);
  sub->add_option("--fit", args->fit,
                  "train: train as asked; none: answer a task with the model it brought (load "
                  "tests of the server only: no training, no reports)")
      ->check(CLI::IsMember({"train", "none"}))
      ->capture_default_str();
  sub->add_option("--config", args->config, "The run's config (TOML): data, partition, quality");
  sub->add_option("--set", args->sets, "Override a config key: --set key=value (repeatable)");
  sub->add_option("--data-dir", args->client.data_dir,
                  "Train on own files here (train-images/-labels IDX, or train.csv) instead of "
                  "partition K of the config's data");
  sub->add_option("--state-dir", args->client.state_dir,
                  "Keep the client algorithm's state (SCAFFOLD's c_i, FedDyn's gradient, MOON's previous "
                  "model) here across rounds and restarts; default: --tls-dir, or memory without it");
  sub->add_option("--give-up-after", args->client.give_up_s,
                  "Seconds to keep trying to reach the server")
      ->capture_default_str();
  sub->add_option("--speed-ghz", args->client.speed_ghz, "Device speed to state (optional)");
  sub->add_option("--bandwidth-mhz", args->client.bandwidth_mhz, "Bandwidth to state (optional)");
  AddSecurity(sub, &args->client.tls_dir, &args->client.insecure,
              "ca.crt, client-K.crt, client-K.key");
  return [args, id, ids] {
    if (id->count() + ids->count() == 0) throw Error("client: give --id K (or --ids A-B)");
    if (ids->count() > 0) std::tie(args->client.id, args->client.last_id) = ParseIdRange(args->ids);
    args->client.fit_none = args->fit == "none";
    Config config = Config::Load(args->config, args->sets);
    RunClient(config, args->client);
  };
}

Runner AddKeygen(CLI::App& app) {
  struct Args {
    int id = -1;
    bool server = false;
    std::string out = ".";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "keygen",
      "Make a party's keys here, on its own machine: a client's TLS key, secure aggregation "
      "signing key and DP noise key (kept here), a certificate request and a roster line (for "
      "the CA); or (--server) the server's DP noise key");
  CLI::Option* id = sub->add_option("--id", args->id, "This client's id (its certificate's CN client-K)");
  CLI::Option* server =
      sub->add_flag("--server", args->server, "The server's DP noise key, server.dp.key (dp.noise = keyed)");
  id->excludes(server);
  sub->add_option("--out", args->out, "Directory to write the keys to (made if missing)")
      ->capture_default_str();
  sub->footer("The CA signs the request and lists the roster line: scripts/make-certs.sh --sign CA_DIR "
              "client-K.csr client-K.secagg.pub. Keys are never overwritten.");
  return [args, id] {
    if (args->server) {
      MakeDirs(args->out);
      const std::string path = ServerNoiseKeyPath(args->out);
      WriteNewNoiseKey(path);
      std::printf("keep here, readable by this user only: %s\n", path.c_str());
      return;
    }
    if (id->count() == 0) throw Error("keygen: give --id K (a client's keys) or --server");
    const std::vector<std::string> files = GenerateClientKeys(args->out, args->id);
    std::printf(
        "keep here, readable by this user only: %s, %s, %s\nsend to the certificate authority: %s, %s\n",
        files[0].c_str(), files[1].c_str(), files[2].c_str(), files[3].c_str(), files[4].c_str());
  };
}

Runner AddRelay(CLI::App& app) {
  struct Args {
    RelayOptions relay;
    MonitorArgs monitor;
  };
  auto args = std::make_shared<Args>();
  RelayOptions* options = &args->relay;
  CLI::App* sub = app.add_subcommand(
      "relay", "Relay between a server and the clients that connect here (tasks down, one exact "
               "partial sum up per round)");
  sub->add_option("--server", options->server, "The server's HOST:PORT")->required();
  sub->add_option("--listen", options->listen, "HOST:PORT for the clients (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--id", options->id, "This relay's id R (its certificate's CN relay-R)")->required();
  sub->add_option("--give-up-after", options->give_up_s, "Seconds to keep trying to reach the server")
      ->capture_default_str();
  AddSecurity(sub, &options->tls_dir, &options->insecure, "ca.crt, relay-R.crt, relay-R.key");
  AddMonitorOptions(sub, &args->monitor);
  sub->footer("Clients connect with fedprof client --server THIS_RELAY'S_HOST:PORT. No config: the "
              "server says what its clients train. Certificates: RELAYS=R scripts/make-certs.sh DIR N");
  return [args] {
    // Its clients connected, their results passed on or refused, bytes moved.
    const std::unique_ptr<RunMonitor> monitor = StartMonitor(args->monitor, "relay");
    RunRelay(args->relay, monitor.get());
  };
}

}  // namespace fedprof::cli
