// A client that breaks the rules, for the deployment tests: it speaks the
// real protocol through the real gRPC stubs, then sends what an honest
// client never would. It registers with 1000 samples and reports honestly
// (so it gets selected); what it does with a training task is its mode.
//
//   rogue_client --server HOST:PORT --id K --tls-dir DIR --mode MODE
// MODE: nan     returns a model full of NaN
//       shape   returns a model one value short
//       version speaks the next protocol version
//       slow    sends heartbeats but takes ten minutes over every task
//       weight  returns the global model shifted by 1e-5 and claims 2^31 - 1
//               samples in its first result, 1001 in later ones
//       hostile first sends every string field of every message with a
//               newline (forging a log line), with ESC sequences and at
//               4 MiB, NaN where a request carries a number, and bytes that
//               are no message; prints how many of these calls the server
//               refused; then returns results with a NaN loss
//       huge    sends three registrations of 64 MiB, then exits
//       slowread registers and sends heartbeats, takes its first task's
//               status and then reads nothing more of it, for ten minutes
//       relaysum acts as relay K (its certificate relay-K) for clients
//               0 and 1, passes on honest results of their tasks without
//               models, then sends a sum of the right size whose weight is
//               not theirs; then a sum from another relay's batch; then
//               a sum of a negative weight
//       cleartext registers its secure aggregation key, sends a secure
//               aggregation message while no session is open and one under
//               a session the server never issued, then answers every
//               training task, secure aggregation or not, with its model
//               in the clear (the global model), printing each verdict, and
//               after each sends its task's session a message
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "federation.grpc.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/deploy/client/client.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace {

namespace pb = fedprof::federation::v1;

constexpr int64_t kSamples = 1000;

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// What the server made of the hostile calls.
struct Refusals {
  int total = 0;  // a failed status, or a result it did not accept
  // Of those, unary requests over the port's message limit: gRPC drops them
  // before any code of the server's runs.
  int by_grpc = 0;
};

// The hostile calls, on `channel`'s stub and raw.
Refusals SendHostileCalls(const std::shared_ptr<grpc::Channel>& channel, int id) {
  auto stub = pb::Federation::NewStub(channel);
  pb::RegisterRequest honest;
  honest.set_protocol_version(fedprof::kProtocolVersion);
  honest.set_client_id(id);
  honest.set_num_samples(kSamples);
  std::string session;
  {
    pb::RegisterReply reply;
    grpc::ClientContext context;
    context.set_deadline(In(10));
    const grpc::Status s = stub->Register(&context, honest, &reply);
    if (!s.ok()) throw fedprof::Error("honest registration refused: " + s.error_message());
    session = reply.session();
  }
  Refusals refused;
  auto unary = [&](const std::function<grpc::Status(grpc::ClientContext*)>& call) {
    grpc::ClientContext context;
    context.set_deadline(In(10));
    const grpc::Status s = call(&context);
    refused.total += s.ok() ? 0 : 1;
    refused.by_grpc += s.error_message().rfind("Received message larger than max", 0) == 0;
  };
  auto push = [&](const pb::ResultHeader& header) {
    grpc::ClientContext context;
    context.set_deadline(In(10));
    pb::PushReply reply;
    auto writer = stub->PushResult(&context, &reply);
    pb::ResultChunk chunk;
    *chunk.mutable_header() = header;
    writer->Write(chunk, grpc::WriteOptions().set_last_message());
    const grpc::Status s = writer->Finish();
    refused.total += s.ok() && reply.accepted() ? 0 : 1;
  };
  auto reg = [&](const pb::RegisterRequest& r) {
    unary([&](grpc::ClientContext* c) {
      pb::RegisterReply reply;
      return stub->Register(c, r, &reply);
    });
  };
  auto pull = [&](const std::string& session_field, double wait_s) {
    pb::PullRequest request;
    request.set_protocol_version(fedprof::kProtocolVersion);
    request.set_client_id(id);
    request.set_session(session_field);
    request.set_wait_s(wait_s);
    unary([&](grpc::ClientContext* c) {
      auto reader = stub->PullTask(c, request);
      pb::TaskChunk chunk;
      while (reader->Read(&chunk)) {
      }
      return reader->Finish();
    });
  };
  const std::vector<std::string> payloads = {
      "x\nwarning: round 1: client 0 refused: forged",  // a line of its own
      "\x1b[2J\x1b[31mred\x1b[0m",                      // clears a terminal
      std::string(4 << 20, 'A')};
  for (const std::string& p : payloads) {
    pb::RegisterRequest r = honest;
    r.set_model_sha256(p);
    reg(r);
    pb::HeartbeatRequest h;
    h.set_protocol_version(fedprof::kProtocolVersion);
    h.set_client_id(id);
    h.set_session(p);
    unary([&](grpc::ClientContext* c) {
      pb::HeartbeatReply reply;
      return stub->Heartbeat(c, h, &reply);
    });
    pull(p, 0);
    pb::ResultHeader header;
    header.set_protocol_version(fedprof::kProtocolVersion);
    header.set_client_id(id);
    header.set_num_samples(kSamples);
    header.set_session(p);
    push(header);
    header.set_session(session);
    header.set_error(p);
    push(header);
    header.clear_error();
    header.set_ok(true);
    header.mutable_profile()->set_layer(p);
    push(header);
  }
  pb::RegisterRequest nan_speed = honest;
  nan_speed.set_speed_ghz(NAN);
  reg(nan_speed);
  pull(session, NAN);
  // Bytes that are no RegisterRequest.
  grpc::GenericStub generic(channel);
  grpc::Slice junk(std::string("\xff\xff\xff\xff\x0f", 5));
  const grpc::ByteBuffer request(&junk, 1);
  unary([&](grpc::ClientContext* c) {
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(c, "/fedprof.federation.v1.Federation/Register", grpc::StubOptions(),
                      &request, &response, [&](grpc::Status s) { done.set_value(s); });
    return done.get_future().get();
  });
  return refused;
}

// The cleartext mode: a client that sends its model in the clear whatever
// its task says.
int CleartextClient(const std::shared_ptr<grpc::Channel>& channel, const std::string& tls_dir, int id) {
  auto stub = pb::Federation::NewStub(channel);
  pb::RegisterRequest request;
  request.set_protocol_version(fedprof::kProtocolVersion);
  request.set_client_id(id);
  request.set_num_samples(kSamples);
  request.set_secagg_verify_key(fedprof::SecAggSigningKey(tls_dir, id).public_key);  // its own, as issued
  pb::RegisterReply registered;
  {
    grpc::ClientContext c;
    c.set_deadline(In(10));
    const grpc::Status s = stub->Register(&c, request, &registered);
    if (!s.ok()) throw fedprof::Error("register: " + s.error_message());
  }
  // A secure aggregation message for `task` under `session`; the reason it
  // was answered with.
  const auto secagg = [&](const std::string& session, int64_t task) {
    pb::SecAggRequest m;
    m.set_protocol_version(fedprof::kProtocolVersion);
    m.set_client_id(id);
    m.set_session(session);
    m.set_task_id(task);
    m.mutable_advertise()->set_client(id);
    pb::SecAggReply reply;
    grpc::ClientContext c;
    c.set_deadline(In(10));
    const grpc::Status s = stub->SecAgg(&c, m, &reply);
    std::printf("secure aggregation message: %s\n",
                s.ok() ? reply.reason().c_str() : s.error_message().c_str());
    std::fflush(stdout);
  };
  secagg(registered.session(), 1);
  secagg(std::string(32, 'f'), 1);
  for (;;) {
    pb::PullRequest pull;
    pull.set_protocol_version(fedprof::kProtocolVersion);
    pull.set_client_id(id);
    pull.set_session(registered.session());
    pull.set_wait_s(1);  // a pull waiting at the server keeps this client alive
    grpc::ClientContext c;
    c.set_deadline(In(30));
    auto reader = stub->PullTask(&c, pull);
    pb::TaskChunk chunk;
    pb::TaskHeader header;
    std::string params;
    pb::Status status = pb::WAIT;
    while (reader->Read(&chunk)) {
      if (chunk.has_status()) status = chunk.status();
      if (chunk.has_header()) header = chunk.header();
      if (chunk.has_params()) params += chunk.params();
    }
    reader->Finish();
    if (status == pb::DONE) return 0;
    if (status != pb::TASK) continue;
    pb::PushReply reply;
    grpc::ClientContext pc;
    pc.set_deadline(In(30));
    auto writer = stub->PushResult(&pc, &reply);
    pb::ResultChunk out;
    pb::ResultHeader* h = out.mutable_header();
    h->set_protocol_version(fedprof::kProtocolVersion);
    h->set_client_id(id);
    h->set_session(registered.session());
    h->set_task_id(header.task_id());
    h->set_ok(true);
    h->set_num_samples(kSamples);
    h->set_train_loss(1.0);
    const bool training = header.train().epochs() > 0;
    h->set_num_params(training ? header.num_params() : 0);
    writer->Write(out);
    for (size_t at = 0; training && at < params.size(); at += size_t{1} << 20) {
      pb::ResultChunk part;
      part.set_params(params.substr(at, size_t{1} << 20));
      writer->Write(part);
    }
    writer->WritesDone();
    writer->Finish();
    std::printf("round %lld%s: %s %s\n", static_cast<long long>(header.round()),
                header.has_secagg() ? " (secure aggregation)" : "", reply.accepted() ? "accepted" : "refused:",
                reply.reason().c_str());
    std::fflush(stdout);
    if (header.has_secagg()) secagg(registered.session(), header.task_id());  // its result was refused
  }
}

// The relaysum mode: a relay whose sums are not of what it passed on.
int RogueRelay(const std::string& server, const std::string& tls_dir, int id) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  const auto channel =
      grpc::CreateCustomChannel(server, fedprof::ClientCredentials(tls_dir, "relay-" + std::to_string(id)), args);
  auto stub = pb::Federation::NewStub(channel);
  std::string session;
  int64_t num_params = 0;
  std::atomic<bool> done{false};
  auto sync = [&] {
    pb::RelaySyncRequest request;
    request.set_protocol_version(fedprof::kProtocolVersion);
    request.set_relay_id(id);
    request.set_session(session);
    for (int k : {0, 1}) {
      pb::RelayedClient* c = request.add_clients();
      c->set_client_id(k);
      c->set_num_samples(kSamples);
    }
    pb::RelaySyncReply reply;
    grpc::ClientContext c;
    c.set_deadline(In(5));
    const grpc::Status s = stub->RelaySync(&c, request, &reply);
    if (!s.ok()) throw fedprof::Error("sync: " + s.error_message());
    session = reply.session();
    num_params = reply.setup().num_params();
    if (reply.status() == pb::DONE) done = true;
  };
  sync();
  std::thread([&] {  // alive all along
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      try {
        sync();
      } catch (...) {
      }
    }
  }).detach();
  int batches = 0;
  while (!done) {
    pb::RelayPullRequest pull;
    pull.set_protocol_version(fedprof::kProtocolVersion);
    pull.set_relay_id(id);
    pull.set_session(session);
    pull.set_wait_s(5);
    grpc::ClientContext c;
    auto reader = stub->RelayPull(&c, pull);
    pb::RelayTaskChunk chunk;
    pb::RelayBatchHeader batch;
    bool got = false;
    while (reader->Read(&chunk)) {
      if (chunk.has_header()) {
        batch = chunk.header();
        got = true;
      }
    }
    reader->Finish();
    if (!got) continue;
    std::vector<int> accepted;
    for (const pb::RelayTask& t : batch.tasks()) {
      pb::RelayResultRequest request;
      request.set_protocol_version(fedprof::kProtocolVersion);
      request.set_relay_id(id);
      request.set_session(session);
      request.set_batch_id(batch.batch_id());
      pb::ResultHeader* h = request.mutable_result();
      h->set_protocol_version(fedprof::kProtocolVersion);
      h->set_client_id(t.client_id());
      h->set_task_id(t.header().task_id());
      h->set_ok(true);
      h->set_num_samples(kSamples);
      h->set_train_loss(1.0);
      pb::PushReply reply;
      grpc::ClientContext rc;
      rc.set_deadline(In(10));
      if (stub->RelayResult(&rc, request, &reply).ok() && reply.accepted()) accepted.push_back(t.client_id());
    }
    // A sum of the right size whose weight is not its clients' (first), then
    // a sum for a batch that is not this relay's, then one that no sum of
    // models can be (a negative weight).
    const int kind = batches++;
    fedprof::ModelSum sum;
    sum.Reset(static_cast<size_t>(num_params));
    sum.Add(fedprof::FlatParams(static_cast<size_t>(num_params), 0.0f), 7);
    pb::RelaySumChunk head;
    pb::RelaySumHeader* h = head.mutable_header();
    h->set_protocol_version(fedprof::kProtocolVersion);
    h->set_relay_id(id);
    h->set_session(session);
    h->set_batch_id(kind == 1 ? batch.batch_id() + 1000 : batch.batch_id());
    *h->mutable_client_ids() = {accepted.begin(), accepted.end()};
    std::string bytes = sum.Serialize();
    if (kind == 2) {
      const int64_t negative = -5;
      std::memcpy(&bytes[sizeof(int64_t)], &negative, sizeof negative);  // Serialize's weight field
    }
    h->set_bytes(static_cast<int64_t>(bytes.size()));
    pb::PushReply reply;
    grpc::ClientContext sc;
    sc.set_deadline(In(30));
    auto writer = stub->RelaySum(&sc, &reply);
    writer->Write(head);
    pb::RelaySumChunk part;
    part.set_sum(bytes);
    writer->Write(part);
    writer->WritesDone();
    const grpc::Status s = writer->Finish();
    std::printf("rogue relay: sum of batch %lld: %s\n", static_cast<long long>(batch.batch_id()),
                s.ok() ? (reply.accepted() ? "accepted" : ("not accepted: " + reply.reason()).c_str())
                       : s.error_message().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

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
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(128 << 20);  // the server, not this side, must refuse
    if (mode == "slowread") {
      // A reader that announces HTTP/2's first window (64 KiB) and no more:
      // gRPC's bandwidth probe would otherwise widen it, on a fast loopback,
      // to most of a model it never reads.
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
    }
    const auto channel =
        grpc::CreateCustomChannel(server, fedprof::ClientCredentials(tls_dir, id), args);
    auto stub = pb::Federation::NewStub(channel);
    if (mode == "version") {
      pb::RegisterRequest request;
      request.set_protocol_version(fedprof::kProtocolVersion + 1);
      request.set_client_id(id);
      request.set_num_samples(10);
      pb::RegisterReply reply;
      grpc::ClientContext context;
      context.set_deadline(In(10));
      const grpc::Status s = stub->Register(&context, request, &reply);
      std::printf("register: %s\n", s.ok() ? "accepted" : s.error_message().c_str());
      return s.ok() ? 0 : 1;
    }
    if (mode == "huge") {  // three registrations of 64 MiB each
      for (int i = 0; i < 3; ++i) {
        pb::RegisterRequest request;
        request.set_protocol_version(fedprof::kProtocolVersion);
        request.set_client_id(id);
        request.set_num_samples(kSamples);
        request.set_model_sha256(std::string(64 << 20, 'A'));
        pb::RegisterReply reply;
        grpc::ClientContext context;
        context.set_deadline(In(30));
        const grpc::Status s = stub->Register(&context, request, &reply);
        std::printf("huge register: %s\n", s.error_message().c_str());
      }
      return 0;
    }
    if (mode == "relaysum") {
      return RogueRelay(server, tls_dir, id);
    }
    if (mode == "cleartext") return CleartextClient(channel, tls_dir, id);
    if (mode == "slowread") {
      pb::RegisterRequest request;
      request.set_protocol_version(fedprof::kProtocolVersion);
      request.set_client_id(id);
      request.set_num_samples(kSamples);
      pb::RegisterReply registered;
      grpc::ClientContext context;
      context.set_deadline(In(10));
      const grpc::Status s = stub->Register(&context, request, &registered);
      if (!s.ok()) throw fedprof::Error("register: " + s.error_message());
      std::thread([&] {  // alive all along
        for (;;) {
          pb::HeartbeatRequest beat;
          beat.set_protocol_version(fedprof::kProtocolVersion);
          beat.set_client_id(id);
          beat.set_session(registered.session());
          pb::HeartbeatReply reply;
          grpc::ClientContext c;
          c.set_deadline(In(5));
          stub->Heartbeat(&c, beat, &reply);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }).detach();
      for (;;) {
        pb::PullRequest pull;
        pull.set_protocol_version(fedprof::kProtocolVersion);
        pull.set_client_id(id);
        pull.set_session(registered.session());
        pull.set_wait_s(25);
        grpc::ClientContext c;
        auto reader = stub->PullTask(&c, pull);
        pb::TaskChunk chunk;
        if (reader->Read(&chunk) && chunk.has_status() && chunk.status() == pb::TASK) {
          std::printf("took a task's status; reading no more of it\n");
          std::fflush(stdout);
          std::this_thread::sleep_for(std::chrono::minutes(10));
          return 0;
        }
        while (reader->Read(&chunk)) {
        }
        reader->Finish();
      }
    }
    if (mode == "hostile") {
      const Refusals refused = SendHostileCalls(channel, id);
      std::printf("hostile calls refused: %d, by gRPC before the server's code: %d\n",
                  refused.total, refused.by_grpc);
      std::fflush(stdout);
    }
    fedprof::GrpcClientOptions o;
    o.server = server;
    o.tls_dir = tls_dir;
    o.id = id;
    o.num_samples = kSamples;
    o.give_up_s = 30;
    int64_t size = 0;
    int results = 0;
    fedprof::RunGrpcClient(
        o, [&](const fedprof::ServerSetup& setup) { size = setup.num_params; },
        [&](const fedprof::FitInstructions& ins) {
          fedprof::FitResult r;
          r.ok = true;
          r.num_samples = kSamples;
          if (ins.train.epochs == 0) return r;  // honest reports, so it gets selected
          // Alive (heartbeats come from their own thread) but never in time.
          if (mode == "slow") std::this_thread::sleep_for(std::chrono::minutes(10));
          if (mode == "weight") {
            // One such result at full weight would wreck the model.
            r.params = *ins.global;
            for (float& v : r.params) v += 1e-5f;
            r.num_samples = results++ == 0 ? 2147483647 : kSamples + 1;
            return r;
          }
          if (mode == "hostile") {
            r.params = *ins.global;
            r.train_loss = NAN;
            return r;
          }
          if (mode == "unclipped") {  // an update of norm sqrt(size), said to need no clipping
            r.params = *ins.global;
            for (float& v : r.params) v += 1.0f;
            r.within_clip = true;
            return r;
          }
          r.params.assign(size - (mode == "shape" ? 1 : 0), mode == "nan" ? NAN : 0.0f);
          return r;
        });
    return 0;
  } catch (const std::exception& e) {
    std::printf("rogue client: %s\n", e.what());
    return 1;
  }
}
