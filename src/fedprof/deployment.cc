#include "fedprof/deployment.h"

#include <torch/torch.h>

#include <algorithm>

#include "fedprof/client/client.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/config/options.h"
#include "fedprof/data/loaders.h"
#include "fedprof/models/models.h"
#include "fedprof/run/run.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/grpc_client.h"
#include "fedprof/transport/grpc_server.h"

namespace fedprof {
namespace {

bool IsLoopback(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// Mutual TLS, or plaintext on loopback when asked for in so many words.
void CheckSecurity(const std::string& flag, const std::string& address, const std::string& tls_dir,
                   bool insecure) {
  if (insecure == !tls_dir.empty()) {
    throw Error("--tls-dir DIR (mutual TLS; scripts/make-certs.sh writes DIR) or --insecure "
                "(plaintext, loopback only): give exactly one");
  }
  if (!insecure) return;
  if (!IsLoopback(address)) {
    throw Error(flag + " " + address + ": --insecure is for loopback addresses only; use --tls-dir");
  }
  LogWarning("--insecure: NO TLS. Anyone who can reach " + address +
             " can join as any client and read the model. For loopback experiments only.");
}

void Serve(const Config& config, const std::string& out_dir, const ServeOptions& serve,
           ServerState state, bool resume) {
  CheckSecurity("--listen", serve.listen, serve.tls_dir, serve.insecure);
  const TrainTest data = LoadData(config);
  const Dataset reference = ReferenceSet(config, data, nullptr);
  const ModelSpec spec = SpecFor(config, data.train);
  GrpcServerOptions o;
  o.listen = serve.listen;
  o.tls_dir = serve.tls_dir;
  o.num_clients = static_cast<int>(config.GetInt("clients.count"));
  o.model = spec;
  const std::shared_ptr<Model> initial = InitialModel(config, spec);
  // Refused before any client is waited for.
  CheckStrategyFitsModel(*MakeStrategy(config, {o.num_clients, nullptr}), *initial, config);
  o.num_params = static_cast<int64_t>(Flatten(*initial).size());
  o.heartbeat_s = config.GetDouble("deploy.heartbeat_s");
  o.heartbeat_timeout_s = config.GetDouble("deploy.heartbeat_timeout_s");
  o.round_timeout_s = config.GetDouble("deploy.round_timeout_s");
  o.chunk_bytes = static_cast<size_t>(config.GetInt("deploy.chunk_kb")) * 1024;
  o.max_samples = config.GetInt("deploy.max_samples");
  if (o.heartbeat_timeout_s <= o.heartbeat_s) {
    throw Error("deploy.heartbeat_timeout_s: " + std::to_string(o.heartbeat_timeout_s) +
                " must exceed deploy.heartbeat_s (" + std::to_string(o.heartbeat_s) + ")");
  }
  GrpcTransport transport(o);
  transport.LoadClaims(state.client_states);
  const int64_t min_clients = config.GetInt("deploy.min_clients");
  const int wanted = static_cast<int>(min_clients == 0 ? o.num_clients
                                                       : std::min<int64_t>(min_clients, o.num_clients));
  LogProgress("fedprof server: listening on " + transport.address() +
              (serve.tls_dir.empty() ? " (INSECURE)" : " (mutual TLS)") + "; waiting for " +
              std::to_string(wanted) + " of " + std::to_string(o.num_clients) + " clients");
  transport.WaitForClients(wanted, config.GetDouble("deploy.start_timeout_s"));

  ServerOptions so = ServerOptionsFrom(config);
  so.min_results = static_cast<int>(config.GetInt("deploy.min_results"));
  so.round_attempts = static_cast<int>(config.GetInt("deploy.round_attempts"));
  ClientSide clients;
  clients.rows = [&] {
    std::vector<ClientRow> rows;
    for (const GrpcTransport::Registration& r : transport.Registrations()) {
      ClientRow row;
      row.size = r.num_samples;
      row.speed_ghz = r.speed_ghz;
      row.bandwidth_mhz = r.bandwidth_mhz;
      row.round_s = r.mean_round_s;
      rows.push_back(row);
    }
    return rows;
  };
  clients.save_states = [&] { return transport.SaveClaims(); };
  RunRounds(config, so, data, reference, out_dir, std::move(state), resume, transport, clients);
  transport.Finish(2 * o.heartbeat_s + 1);
}

// train-images/labels IDX files or train.csv in `dir`.
Dataset LoadOwnData(const std::string& dir, const Config& config) {
  if (FileExists(dir + "/train.csv")) {
    CsvOptions csv;
    csv.targets = SplitList(config.GetString("data.targets"));
    csv.classification = config.GetString("data.task") == "classification";
    if (csv.targets.empty()) throw Error("data.targets: CSV data needs at least one target column");
    return LoadCsv(dir + "/train.csv", csv);
  }
  auto find = [&](const std::string& stem) {
    for (const std::string& p : {dir + "/" + stem, dir + "/" + stem + ".gz"}) {
      if (FileExists(p)) return p;
    }
    throw Error("--data-dir " + dir + ": no train.csv and no " + stem + "[.gz]");
  };
  const std::string images = find("train-images-idx3-ubyte");  // named first when both are missing
  return LoadIdx(images, find("train-labels-idx1-ubyte"));
}

}  // namespace

void RunServer(const Config& config, const std::string& out_dir, const ServeOptions& serve) {
  MakeDirs(out_dir);
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Serve(config, out_dir, serve, ServerState(), /*resume=*/false);
}

void ResumeServer(const std::string& out_dir, const std::vector<std::string>& overrides,
                  const ServeOptions& serve) {
  // The config first: the checkpoint must be one of its runs.
  const Config config = ResumeConfig(out_dir, overrides);
  ServerState state = LoadCheckpoint(out_dir + "/checkpoint.bin", config.Fingerprint());
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Serve(config, out_dir, serve, std::move(state), /*resume=*/true);
}

void RunClient(const Config& config, const ClientOptions& options) {
  CheckSecurity("--server", options.server, options.tls_dir, options.insecure);
  if (options.id < 0 || options.id >= config.GetInt("clients.count")) {
    throw Error("--id " + std::to_string(options.id) + ": not one of the config's clients 0.." +
                std::to_string(config.GetInt("clients.count") - 1) + " (clients.count)");
  }
  // Only this client's data stays in memory.
  Client client = options.data_dir.empty()
                      ? Population(LoadData(config).train, config).MakeClient(options.id)
                      : Client(options.id, LoadOwnData(options.data_dir, config));
  if (client.num_samples() == 0) throw Error("client " + std::to_string(options.id) + " holds no data");
  at::set_num_threads(1);  // as a simulated client trains: the same numbers

  std::shared_ptr<Model> model;
  // The server sends a TorchScript module's hash, never the module: this
  // client builds it from its own copy (model.file), which must hash alike.
  const std::string& module_file = config.GetString("model.file");
  const std::string module_sha256 = module_file.empty() ? "" : FileSha256Hex(module_file);
  auto prepare = [&](ModelSpec spec, int64_t num_params) {
    const std::string what = spec.name == "torchscript" ? "its TorchScript module" : spec.name;
    if (spec.name == "torchscript") {
      if (module_file.empty()) {
        throw Error("the server trains a TorchScript module (SHA-256 " + spec.file_sha256 +
                    "); give this client the same file with --set model.file=PATH");
      }
      spec.file = module_file;
    }
    const std::vector<int64_t> shape = client.data().x.sizes().slice(1).vec();
    if (shape != spec.input_shape) {
      throw Error("the server trains " + what + " on samples of another shape than this "
                  "client's data");
    }
    if (!client.data().is_regression() &&
        client.data().y.max().item<int64_t>() >= spec.outputs) {
      throw Error("this client's labels exceed the server's " + std::to_string(spec.outputs) +
                  " classes");
    }
    model = MakeModel(spec);
    if (static_cast<int64_t>(Flatten(*model).size()) != num_params) {
      throw Error("the server's model has " + std::to_string(num_params) +
                  " values, the one built here " + std::to_string(Flatten(*model).size()));
    }
  };
  auto fit = [&](const FitInstructions& ins) {
    try {
      return client.Fit(ins, *model);
    } catch (const std::exception& e) {  // reported to the server, which skips the result
      FitResult failed;
      failed.ok = false;
      failed.error = e.what();
      return failed;
    }
  };
  GrpcClientOptions o;
  o.server = options.server;
  o.tls_dir = options.tls_dir;
  o.id = options.id;
  o.num_samples = client.num_samples();
  o.speed_ghz = options.speed_ghz;
  o.bandwidth_mhz = options.bandwidth_mhz;
  o.model_sha256 = module_sha256;
  o.give_up_s = options.give_up_s;
  o.progress = config.GetBool("report.progress");
  RunGrpcClient(o, prepare, fit);
}

}  // namespace fedprof
