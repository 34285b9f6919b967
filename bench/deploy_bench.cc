// Model transfer throughput of the deployment transport on loopback.
//
// A GrpcTransport and N clients (threads running the real client loop over
// real gRPC channels; 10 by default) exchange a model of LeNet-5's and of
// ResNet-18's size; each client answers its task with the model it
// received, so a round moves N models down and N up. Printed: the median
// round's wall time and bytes moved / that time, with mutual TLS and without.
//
//   deploy_bench [--clients N] [--rounds R] [--model lenet5|resnet18]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "fedprof/core/single_threaded_ops.h"
#include "fedprof/deploy/client/client.h"
#include "fedprof/deploy/server/grpc_transport.h"

namespace {

double Round(fedprof::GrpcTransport& server, const std::vector<int>& ids,
             const fedprof::FitInstructions& ins) {
  const auto start = std::chrono::steady_clock::now();
  size_t ok = 0;
  std::vector<fedprof::ClientInstructions> tasks;
  for (int id : ids) tasks.push_back({id, ins});
  server.Fit(tasks, [&](size_t, fedprof::FitResult&& r) {
    ok += r.ok ? 1 : 0;
    return std::string();
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (ok != ids.size()) std::fprintf(stderr, "warning: %zu of %zu results\n", ok, ids.size());
  return s;
}

// Median wall time of `rounds` rounds that move a model of `values` floats
// down to every client and back.
double MedianRound(int64_t values, int clients, int rounds, const std::string& tls_dir) {
  fedprof::GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_dir = tls_dir;
  o.num_clients = clients;
  o.num_params = values;
  // A well-formed model description (clients check it); they never build it.
  o.model.input_shape = {values};
  o.model.outputs = 1;
  fedprof::GrpcTransport server(o);
  std::vector<std::thread> threads;
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      fedprof::GrpcClientOptions c;
      c.server = server.address();
      c.tls_dir = tls_dir;
      c.id = k;
      c.num_samples = 100;
      c.progress = false;
      fedprof::RunGrpcClient(
          c, [](const fedprof::ServerSetup&) {},
          [](const fedprof::FitInstructions& ins) {
            fedprof::FitResult r;
            r.ok = true;
            r.num_samples = 100;
            r.params = *ins.global;  // straight back
            return r;
          });
    });
  }
  server.WaitForClients(clients, 60);
  std::vector<int> ids(clients);
  for (int k = 0; k < clients; ++k) ids[k] = k;
  fedprof::FitInstructions ins;
  ins.global = std::make_shared<const fedprof::FlatParams>(values, 0.5f);
  ins.train.epochs = 1;
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) times.push_back(Round(server, ids, ins));
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  server.Finish(5);
  for (auto& t : threads) t.join();
  return median;
}

}  // namespace

FEDPROF_SINGLE_THREADED_OPS;

int main(int argc, char** argv) {
  int clients = 10, rounds = 5;
  std::string only;  // one model's name, or both
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--model")) only = argv[i + 1];
  }
  if (!only.empty() && only != "lenet5" && only != "resnet18") {
    std::fprintf(stderr, "deploy_bench: --model %s: lenet5 or resnet18\n", only.c_str());
    return 1;
  }
  // Certificates in a folder of its own ($TMPDIR), removed after.
  std::string dir = (std::filesystem::temp_directory_path() / "fedprof_deploy_bench.XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "deploy_bench: cannot make a folder in $TMPDIR\n");
    return 1;
  }
  const std::string certs = dir + "/certs";
  const std::string make = "bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh " + certs + " " +
                           std::to_string(clients) + " > /dev/null";
  if (std::system(make.c_str()) != 0) return 1;
  std::printf("model transfer to %d clients on loopback (down + up), median of %d rounds\n",
              clients, rounds);
  std::printf("| model | values | MB per round | mutual TLS: ms per round | MB/s |"
              " plaintext: ms per round | MB/s |\n|---|---|---|---|---|---|---|\n");
  for (const auto& [name, key, values] :
       {std::tuple<const char*, const char*, int64_t>{"LeNet-5", "lenet5", 61706},
        {"ResNet-18", "resnet18", 11173962}}) {
    if (!only.empty() && only != key) continue;
    const double megabytes = 2.0 * clients * static_cast<double>(values) * 4 / 1e6;
    const double tls = MedianRound(values, clients, rounds, certs);
    const double plain = MedianRound(values, clients, rounds, "");
    std::printf("| %s | %lld | %.1f | %.1f | %.0f | %.1f | %.0f |\n", name,
                static_cast<long long>(values), megabytes, 1e3 * tls, megabytes / tls, 1e3 * plain,
                megabytes / plain);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
