#ifndef FEDPROF_PROTOCOL_WIRE_H_
#define FEDPROF_PROTOCOL_WIRE_H_

// The protocol structs to and from their protobuf messages
// (proto/federation.proto). For the transports' own .cc files only: the
// generated types stay out of every header the rest of the library reads.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/data/feature_scaling.h"
#include "fedprof/models/spec.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {
namespace federation::v1 {
class TaskHeader;
class ResultHeader;
class ModelSpec;
class FeatureScaling;
class RelaySyncRequest;
class RelayBatchHeader;
}  // namespace federation::v1

// The protocol's version; a peer speaking another one is refused. Version 2:
// secure aggregation against an active server (round 0′, a setup without
// the server's tolerance). Version 3: clients that compute their own
// distributed-DP encoding and keep a ledger of what they contributed, and
// send their training loss under secure aggregation only when asked.
// Version 4: the server's feature scaling, which a client applies to a table
// of its own. Version 5: the client algorithms' values after the model in
// tasks and results, the server's run id at registration, and a
// federation's offers of runs resuming (no address yet).
constexpr uint32_t kProtocolVersion = 5;

// "" when `theirs` is this protocol's version, else a message naming both.
std::string ProtocolMismatch(uint32_t theirs, const std::string& peer);

// Bounds on what a decoded message may hold, beyond which it is refused.
constexpr size_t kMaxProfileUnits = size_t{1} << 20;
constexpr size_t kMaxSketchDim = size_t{1} << 20;
constexpr size_t kMaxErrorLength = 1000;
constexpr size_t kMaxLayerNameLength = 256;
// Longest client algorithm name a task may carry (the names are short words).
constexpr size_t kMaxAlgorithmNameLength = 32;
constexpr size_t kMaxCiphertextBytes = 4096;  // a 16384-bit key's n²
constexpr size_t kMaxModelValues = size_t{1} << 31;  // 8 GiB of float32

// SHA-256 (hex) of everything in `task` that shapes a client's update: the
// round, the model (every bit), training, objective, clipping and encoding,
// and what it must report; the same in a simulation and a deployment (no
// task id). A client contributes to a task once (privacy/client_ledger.h),
// and its keyed noise is the key's for this digest.
std::string TaskDigest(const FitInstructions& task);

// FitInstructions without the model (which travels in chunks).
void ToWire(const FitInstructions& instructions, int64_t task_id, int64_t num_params,
            federation::v1::TaskHeader* out);
// Throws fedprof::Error naming the malformed field. The result's `global`
// is left null.
FitInstructions FromWire(const federation::v1::TaskHeader& header);

// The architecture in a Register reply, which the client builds. Throws
// fedprof::Error naming the field for one no server configures: an unknown
// model, a sample shape of other than 1..3 dimensions (2^24 values in all),
// outputs outside 1..2^20, more than 64 hidden layers or one outside
// 1..2^20 units, a profiled layer name over 256 bytes, or a width outside
// model.width's 0.5..2.
ModelSpec FromWire(const federation::v1::ModelSpec& spec);

// The feature scaling in a Register reply. FromWire throws fedprof::Error
// saying why one is not a scaling (FeatureScalingProblem).
void ToWire(const FeatureScaling& scaling, federation::v1::FeatureScaling* out);
FeatureScaling FromWire(const federation::v1::FeatureScaling& scaling);

// FitResult without the model; the header says how many values follow.
void ToWire(const FitResult& result, federation::v1::ResultHeader* out);
// Throws fedprof::Error naming the malformed field. params stay empty.
FitResult FromWire(const federation::v1::ResultHeader& header);

// Why a client's claim at registration (directly or through a relay) is
// impossible, or "": a sample count outside [1, max_samples], a speed or
// bandwidth that is NaN, negative or too large.
std::string ClaimProblem(int64_t num_samples, double speed_ghz, double bandwidth_mhz,
                         int64_t max_samples);

// Throws fedprof::Error unless a relay's sync names distinct clients of
// 0 .. num_clients - 1 in increasing order.
void CheckRelayedIds(const federation::v1::RelaySyncRequest& request, int num_clients);

// A relay's batch as its clients' instructions, each with `global`, and
// their task ids by client (`task_ids`). Throws fedprof::Error for a task
// of a client outside 0 .. num_clients - 1, a client with two tasks, or a
// malformed task header.
std::vector<ClientInstructions> FromWire(const federation::v1::RelayBatchHeader& batch,
                                         int num_clients, std::shared_ptr<const FlatParams> global,
                                         std::map<int, int64_t>* task_ids);

// Appends the little-endian float32 values in `bytes` to `out`, refusing
// (fedprof::Error) a slice that is not whole floats or that would take
// `out` past `expected` values.
void AppendFloats(const std::string& bytes, size_t expected, FlatParams* out);

// Sets `out` to values [begin, begin + count) of `params` as little-endian
// bytes, reusing its storage from the previous chunk.
void PutFloats(const FlatParams& params, size_t begin, size_t count, std::string* out);

// A task's θ or a result's model with the client algorithm's values after
// it (SCAFFOLD's c, Δc_i), as one run of values: how the chunks carry both
// (num_algorithm_values of the header counts the second part).
inline FlatParams ModelThenAlgorithmValues(FlatParams model, const FlatParams& values) {
  model.insert(model.end(), values.begin(), values.end());
  return model;
}
// The last `count` of `*values` (at most all), removed from it.
inline FlatParams TakeAlgorithmValues(FlatParams* values, size_t count) {
  const auto split = values->end() - static_cast<std::ptrdiff_t>(std::min(count, values->size()));
  FlatParams taken(split, values->end());
  values->erase(split, values->end());
  return taken;
}

}  // namespace fedprof

#endif  // FEDPROF_PROTOCOL_WIRE_H_
