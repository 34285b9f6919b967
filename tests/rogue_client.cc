// A client that breaks the rules, for the deployment tests: it speaks the
// real protocol through the real gRPC stubs, then sends what an honest
// client never would.
//
//   rogue_client --server HOST:PORT --id K --tls-dir DIR --mode MODE
// MODE: nan     trains nothing, returns a model full of NaN
//       shape   returns a model one value short
//       version speaks protocol version 2
//       slow    sends heartbeats but takes ten minutes over every task
#include <grpcpp/grpcpp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "federation.grpc.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/transport/grpc_client.h"
#include "fedprof/transport/tls.h"

int main(int argc, char** argv) {
  std::string server, tls_dir, mode;
  int id = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--server")) server = argv[i + 1];
    if (!std::strcmp(argv[i], "--id")) id = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--tls-dir")) tls_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
  }
  try {
    if (mode == "version") {
      auto stub = fedprof::federation::v1::Federation::NewStub(
          grpc::CreateChannel(server, fedprof::ClientCredentials(tls_dir, id)));
      fedprof::federation::v1::RegisterRequest request;
      request.set_protocol_version(2);
      request.set_client_id(id);
      request.set_num_samples(10);
      fedprof::federation::v1::RegisterReply reply;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      const grpc::Status s = stub->Register(&context, request, &reply);
      std::printf("register: %s\n", s.ok() ? "accepted" : s.error_message().c_str());
      return s.ok() ? 0 : 1;
    }
    fedprof::GrpcClientOptions o;
    o.server = server;
    o.tls_dir = tls_dir;
    o.id = id;
    o.num_samples = 100;
    o.give_up_s = 30;
    int64_t size = 0;
    fedprof::RunGrpcClient(
        o, [&](const fedprof::ModelSpec&, int64_t num_params) { size = num_params; },
        [&](const fedprof::FitInstructions& ins) {
          fedprof::FitResult r;
          r.ok = true;
          r.num_samples = 100;
          if (ins.train.epochs == 0) return r;  // honest reports, so it gets selected
          // Alive (heartbeats come from their own thread) but never in time.
          if (mode == "slow") std::this_thread::sleep_for(std::chrono::minutes(10));
          r.params.assign(size - (mode == "shape" ? 1 : 0), mode == "nan" ? NAN : 0.0f);
          return r;
        });
    return 0;
  } catch (const std::exception& e) {
    std::printf("rogue client: %s\n", e.what());
    return 1;
  }
}
