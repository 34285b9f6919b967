// Deployment protocol messages (proto/federation.proto, protocol/wire.h) as
// the gRPC transports decode them. Input: a selector byte, then
//   0: a TaskHeader (client side): FromWire, and back through ToWire;
//   1: a ResultHeader (server side): FromWire, then the server's checks;
//   2: a ModelSpec (client side, the server's Register reply);
//   3: a result stream as PushResult reads it: messages of 2-byte
//      little-endian length + ResultChunk bytes, the first its header, the
//      rest model chunks (AppendFloats) for a model of 64 values;
//   4: a task stream as a client reads it: the same framing of TaskChunks;
//   5: a relay's sync as the server reads it: its ids, then each claim;
//   6: a relay's batch header as the relay reads it, for 1000 clients;
//   7: a relay's sum stream as the server reads it: RelaySumChunks, the
//      first its header, the rest the sum's bytes (for a model of 64
//      values), then ModelSum::Parse.

#include <map>
#include <memory>

#include "federation.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/server/server.h"
#include "fedprof/protocol/wire.h"
#include "fuzz/fuzz_common.h"

namespace {

namespace pb = fedprof::federation::v1;
constexpr size_t kModelValues = 64;

std::vector<std::string> Frames(const uint8_t* data, size_t size) {
  std::vector<std::string> frames;
  while (size >= 2) {
    const size_t n = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
    frames.emplace_back(reinterpret_cast<const char*>(data + 2), n);
    data += 2 + n;
    size -= 2 + n;
  }
  return frames;
}

// The server's checks of a result with `expected` model values.
void CheckResult(const fedprof::FitResult& r, size_t expected) {
  using namespace fedprof;
  if (!Server::Validate(r, expected, expected > 0).empty()) return;
  if (r.profile) (void)CheckProfile(*r.profile, *r.profile);
  if (expected > 0) {
    ModelSum sum;
    sum.Reset(expected);
    sum.Add(r.params, r.num_samples);  // Validate vouches for it: must not throw
    for (size_t i = 0; i < expected; ++i) (void)sum.Centered(i, 0.0f);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 1) return 0;
  const uint8_t selector = data[0] % 8;
  ++data;
  --size;
  return fuzz::Run([&] {
    switch (selector) {
      case 0: {
        pb::TaskHeader h;
        if (!h.ParseFromArray(data, static_cast<int>(size))) return;
        const FitInstructions ins = FromWire(h);
        pb::TaskHeader back;
        ToWire(ins, h.task_id(), h.num_params(), &back);
        const FitInstructions again = FromWire(back);
        FUZZ_CHECK(again.round == ins.round && again.seed == ins.seed &&
                       again.report.sketch_dim == ins.report.sketch_dim &&
                       again.train.batch_size == ins.train.batch_size,
                   "task header did not round-trip");
        return;
      }
      case 1: {
        pb::ResultHeader h;
        if (!h.ParseFromArray(data, static_cast<int>(size))) return;
        CheckResult(FromWire(h), 0);
        return;
      }
      case 2: {
        pb::ModelSpec m;
        if (!m.ParseFromArray(data, static_cast<int>(size))) return;
        (void)FromWire(m);
        return;
      }
      case 3: {
        const std::vector<std::string> frames = Frames(data, size);
        if (frames.empty()) return;
        pb::ResultChunk chunk;
        if (!chunk.ParseFromString(frames[0]) || !chunk.has_header()) return;
        FitResult r = FromWire(chunk.header());
        if (chunk.header().num_params() != static_cast<int64_t>(kModelValues)) return;
        for (size_t i = 1; i < frames.size(); ++i) {
          if (!chunk.ParseFromString(frames[i]) || !chunk.has_params()) return;
          AppendFloats(chunk.params(), kModelValues, &r.params);
          FUZZ_CHECK(r.params.size() <= kModelValues, "more values than announced");
        }
        if (r.params.size() == kModelValues) CheckResult(r, kModelValues);
        return;
      }
      case 5: {
        pb::RelaySyncRequest request;
        if (!request.ParseFromArray(data, static_cast<int>(size))) return;
        CheckRelayedIds(request, 1000);
        for (const pb::RelayedClient& c : request.clients()) {
          FUZZ_CHECK(c.client_id() >= 0 && c.client_id() < 1000, "an id out of range passed");
          const std::string why = ClaimProblem(c.num_samples(), c.speed_ghz(), c.bandwidth_mhz(), 1000000);
          FUZZ_CHECK(!why.empty() || (c.num_samples() >= 1 && c.num_samples() <= 1000000),
                     "an impossible claim passed");
        }
        return;
      }
      case 6: {
        pb::RelayBatchHeader batch;
        if (!batch.ParseFromArray(data, static_cast<int>(size))) return;
        std::map<int, int64_t> task_ids;
        const auto global = std::make_shared<const FlatParams>(kModelValues, 0.5f);
        const std::vector<ClientInstructions> tasks = FromWire(batch, 1000, global, &task_ids);
        FUZZ_CHECK(tasks.size() == task_ids.size(), "a client with two tasks passed");
        for (const ClientInstructions& t : tasks) {
          FUZZ_CHECK(t.client_id >= 0 && t.client_id < 1000 && t.instructions.global == global,
                     "a task out of range passed");
        }
        return;
      }
      case 7: {
        const std::vector<std::string> frames = Frames(data, size);
        pb::RelaySumChunk chunk;
        if (frames.empty() || !chunk.ParseFromString(frames[0]) || !chunk.has_header()) return;
        std::string bytes;
        for (size_t i = 1; i < frames.size(); ++i) {
          if (!chunk.ParseFromString(frames[i]) || !chunk.has_sum()) return;
          bytes += chunk.sum();
          if (bytes.size() > 16 + 16 * kModelValues) return;  // the server reads no more
        }
        const ModelSum sum = ModelSum::Parse(bytes, "relay 0's sum");
        for (size_t i = 0; i < sum.size(); ++i) (void)sum.Centered(i, 0.5f);
        return;
      }
      default: {
        const std::vector<std::string> frames = Frames(data, size);
        pb::TaskChunk chunk;
        if (frames.size() < 2 || !chunk.ParseFromString(frames[0]) || !chunk.has_status() ||
            chunk.status() != pb::TASK) {
          return;
        }
        if (!chunk.ParseFromString(frames[1]) || !chunk.has_header()) return;
        (void)FromWire(chunk.header());
        const int64_t announced = chunk.header().num_params();
        const size_t expected = static_cast<size_t>(std::clamp<int64_t>(announced, 0, 4096));
        FlatParams global;
        for (size_t i = 2; i < frames.size(); ++i) {
          if (!chunk.ParseFromString(frames[i]) || !chunk.has_params()) break;
          AppendFloats(chunk.params(), expected, &global);
        }
        FUZZ_CHECK(global.size() <= expected, "more values than announced");
        return;
      }
    }
  });
}
