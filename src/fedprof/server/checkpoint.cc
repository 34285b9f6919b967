#include "fedprof/server/checkpoint.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"

namespace fedprof {
namespace {

using json = nlohmann::json;

constexpr char kMagicPrefix[] = "FEDPROF-CHECKPOINT ";
constexpr size_t kChecksumBytes = 32;  // SHA-256
// Bounds of the config options behind the fields (config/options.cc).
constexpr int64_t kMaxRounds = 10'000'000;
constexpr int64_t kMaxClients = 10'000'000;

// A double as JSON: dump() writes NaN and infinities as null, which would
// make the checkpoint of a diverged run unreadable; they are spelled out.
json Real(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// Checked reads of the header: a missing field, a field of another type or
// out of range is an Error naming it. (nlohmann's implicit conversions would
// turn 1e300 into an int, which is undefined behaviour.)
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& expected) const {
    throw Error(origin_ + ": header field '" + field + "': expected " + expected);
  }

  const json& Field(const json& j, const std::string& prefix, const char* key) const {
    if (!j.is_object()) Fail(prefix.empty() ? "(header)" : prefix, "a JSON object");
    const auto it = j.find(key);
    if (it == j.end()) Fail(prefix + key, "a value (it is missing)");
    return *it;
  }

  int64_t Int(const json& j, const std::string& prefix, const char* key, int64_t lo,
              int64_t hi) const {
    const json& v = Field(j, prefix, key);
    const std::string range = "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) Fail(prefix + key, range);
      return static_cast<int64_t>(u);
    }
    if (!v.is_number_integer()) Fail(prefix + key, range);
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) Fail(prefix + key, range);
    return x;
  }

  double Double(const json& j, const std::string& prefix, const char* key) const {
    const json& v = Field(j, prefix, key);
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
    }
    Fail(prefix + key, "a number, \"nan\", \"inf\" or \"-inf\"");
  }

  bool Bool(const json& j, const std::string& prefix, const char* key) const {
    const json& v = Field(j, prefix, key);
    if (!v.is_boolean()) Fail(prefix + key, "true or false");
    return v.get<bool>();
  }

  const std::string& String(const json& j, const std::string& prefix, const char* key) const {
    const json& v = Field(j, prefix, key);
    if (!v.is_string()) Fail(prefix + key, "a string");
    return v.get_ref<const std::string&>();
  }

  const json& Array(const json& j, const std::string& prefix, const char* key,
                    size_t max_size) const {
    const json& v = Field(j, prefix, key);
    if (!v.is_array() || v.size() > max_size) {
      Fail(prefix + key, "an array of at most " + std::to_string(max_size) + " elements");
    }
    return v;
  }

 private:
  std::string origin_;
};

json ToJson(const RoundMetrics& m) {
  json j = {{"round", m.round},
          {"lr", Real(m.lr)},
          {"selected", m.selected},
          {"returned", m.returned},
          {"refused", m.refused},
          {"timed_out", m.timed_out},
          {"train_loss", Real(m.train_loss)},
          {"evaluated", m.evaluated},
          {"accuracy", Real(m.accuracy)},
          {"loss", Real(m.loss)},
          {"rmse", Real(m.rmse)},
          {"round_time_s", Real(m.round_time_s)},
          {"virtual_time_s", Real(m.virtual_time_s)},
          {"round_energy_wh", Real(m.round_energy_wh)},
          {"profiling_time_s", Real(m.profiling_time_s)},
          {"profiling_energy_wh", Real(m.profiling_energy_wh)},
          {"energy_wh", Real(m.energy_wh)},
          {"wall_s", Real(m.wall_s)}};
  // Only in rounds with a federated evaluation, so other checkpoints read as before.
  if (m.backdoor_evaluated) j["backdoor_success"] = Real(m.backdoor_success);
  j["online"] = m.online;
  if (m.staleness != 0) j["staleness"] = Real(m.staleness);
  if (m.fell_back) j["fallback"] = true;
  if (m.dp_clip_norm != 0) {
    j["dp"] = {{"clip_norm", Real(m.dp_clip_norm)},
               {"unclipped", Real(m.dp_unclipped)},
               {"epsilon", Real(m.dp_epsilon)},
               {"epsilon_server", Real(m.dp_epsilon_server)}};
  }
  if (m.fed_evaluated) {
    j["federated"] = {{"clients", m.fed_clients},
                      {"accuracy", Real(m.fed_accuracy)},
                      {"loss", Real(m.fed_loss)}};
  }
  return j;
}

RoundMetrics FromJson(const Reader& r, const json& j, const std::string& p) {
  RoundMetrics m;
  m.round = r.Int(j, p, "round", 1, kMaxRounds);
  m.lr = r.Double(j, p, "lr");
  m.selected = static_cast<int>(r.Int(j, p, "selected", 0, INT_MAX));
  m.returned = static_cast<int>(r.Int(j, p, "returned", 0, INT_MAX));
  m.refused = static_cast<int>(r.Int(j, p, "refused", 0, INT_MAX));
  m.timed_out = static_cast<int>(r.Int(j, p, "timed_out", 0, INT_MAX));
  m.train_loss = r.Double(j, p, "train_loss");
  m.evaluated = r.Bool(j, p, "evaluated");
  m.accuracy = r.Double(j, p, "accuracy");
  m.loss = r.Double(j, p, "loss");
  m.rmse = r.Double(j, p, "rmse");
  m.round_time_s = r.Double(j, p, "round_time_s");
  m.virtual_time_s = r.Double(j, p, "virtual_time_s");
  m.round_energy_wh = r.Double(j, p, "round_energy_wh");
  m.profiling_time_s = r.Double(j, p, "profiling_time_s");
  m.profiling_energy_wh = r.Double(j, p, "profiling_energy_wh");
  m.energy_wh = r.Double(j, p, "energy_wh");
  m.wall_s = r.Double(j, p, "wall_s");
  // Checkpoints from before availability have no count: 0.
  if (j.contains("online")) m.online = static_cast<int>(r.Int(j, p, "online", 0, INT_MAX));
  if (j.contains("staleness")) m.staleness = r.Double(j, p, "staleness");
  if (j.contains("fallback")) m.fell_back = r.Bool(j, p, "fallback");
  if (j.contains("dp")) {
    m.dp_clip_norm = r.Double(j.at("dp"), p + "dp.", "clip_norm");
    m.dp_unclipped = r.Double(j.at("dp"), p + "dp.", "unclipped");
    m.dp_epsilon = r.Double(j.at("dp"), p + "dp.", "epsilon");
    if (j.at("dp").contains("epsilon_server")) {
      m.dp_epsilon_server = r.Double(j.at("dp"), p + "dp.", "epsilon_server");
    }
  }
  if (j.contains("backdoor_success")) {
    m.backdoor_evaluated = true;
    m.backdoor_success = r.Double(j, p, "backdoor_success");
  }
  if (j.contains("federated")) {
    const json& f = j["federated"];
    const std::string q = p + "federated.";
    m.fed_evaluated = true;
    m.fed_clients = static_cast<int>(r.Int(f, q, "clients", 0, INT_MAX));
    m.fed_accuracy = r.Double(f, q, "accuracy");
    m.fed_loss = r.Double(f, q, "loss");
  }
  return m;
}

bool IsFingerprint(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The models a checkpoint holds, in file order: the global model, then an
// asynchronous run's training models by version. (State: ServerState, const
// to write them, not to read them.)
template <typename State>
auto ModelsOf(State& state) {
  std::vector<decltype(&state.global)> models = {&state.global};
  for (auto& entry : state.training_models) models.push_back(&entry.second);
  return models;
}

// An asynchronous run's training tasks from the header (and the versions of
// their models), checked against the run's round.
void ReadTraining(const Reader& r, const json& h, ServerState* state) {
  if (!h.contains("dispatches")) return;
  state->dispatches = r.Int(h, "", "dispatches", 1, std::numeric_limits<int64_t>::max());
  for (const json& v : r.Array(h, "", "training_models", static_cast<size_t>(kMaxRounds))) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= state->round ||
        state->training_models.count(v.get<int64_t>()) > 0) {
      r.Fail("training_models", "distinct model versions before the round " + std::to_string(state->round));
    }
    state->training_models[v.get<int64_t>()];
  }
  const json& training = r.Array(h, "", "training", static_cast<size_t>(kMaxClients));
  for (size_t i = 0; i < training.size(); ++i) {
    const std::string p = "training[" + std::to_string(i) + "].";
    const json& t = training[i];
    if (!t.is_array() || t.size() != 4) r.Fail(p, "[client, version, dispatch, start_s]");
    const json fields = {{"client", t[0]}, {"version", t[1]}, {"dispatch", t[2]}, {"start_s", t[3]}};
    TrainingTask task;
    task.client_id = static_cast<int>(r.Int(fields, p, "client", 0, kMaxClients - 1));
    task.version = r.Int(fields, p, "version", 0, state->round);
    task.dispatch = r.Int(fields, p, "dispatch", 1, state->dispatches);
    task.start_s = r.Double(fields, p, "start_s");
    if (!(task.start_s >= 0 && task.start_s <= state->virtual_time_s)) {
      r.Fail(p + "start_s", "a virtual time in 0..virtual_time_s");
    }
    if (task.version < state->round && state->training_models.count(task.version) == 0) {
      r.Fail(p + "version", "a version whose model the checkpoint holds");
    }
    state->training.push_back(task);
  }
}

}  // namespace

std::string EncodeCheckpoint(const ServerState& state, const std::string& config_fingerprint) {
  json header = {{"round", state.round},
                 {"num_params", state.global.size()},
                 {"times_selected", state.times_selected},
                 {"virtual_time_s", Real(state.virtual_time_s)},
                 {"energy_j", Real(state.energy_j)},
                 {"strategy_state", state.strategy_state},
                 // The file's key is older than the field's name.
                 {"client_states", state.transport_state},
                 {"config_fingerprint", config_fingerprint},
                 {"history", json::array()}};
  if (!state.model_sha256.empty()) header["model_sha256"] = state.model_sha256;
  for (const auto& m : state.history) header["history"].push_back(ToJson(m));
  // An asynchronous run's clients in training; the models they train on
  // follow the global model, in the order of "training_models".
  if (state.dispatches > 0) {
    json training = json::array(), versions = json::array();
    for (const TrainingTask& t : state.training) {
      training.push_back({t.client_id, t.version, t.dispatch, Real(t.start_s)});
    }
    for (const auto& [version, model] : state.training_models) versions.push_back(version);
    header["dispatches"] = state.dispatches;
    header["training"] = std::move(training);
    header["training_models"] = std::move(versions);
  }
  // dump() of doubles round-trips exactly (shortest representation); strings
  // are escaped, so the header stays one line.
  std::string out = kMagicPrefix + std::to_string(kCheckpointFormat) + "\n";
  out += header.dump();
  out += '\n';
  for (const FlatParams* model : ModelsOf(state)) {
    const size_t bytes = model->size() * sizeof(float);
    const size_t at = out.size();
    out.resize(at + bytes);
    if (bytes > 0) std::memcpy(&out[at], model->data(), bytes);
  }
  const Sha256Digest sum = Sha256(out);
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

void SaveCheckpoint(const std::string& path, const ServerState& state,
                    const std::string& config_fingerprint) {
  WriteFileAtomic(path, EncodeCheckpoint(state, config_fingerprint));
}

DecodedCheckpoint DecodeCheckpoint(const std::string& data, const std::string& origin) {
  // First line: the magic and the format.
  const size_t prefix_len = sizeof(kMagicPrefix) - 1;
  if (data.compare(0, prefix_len, kMagicPrefix) != 0) {
    throw Error(origin + ": byte 0: not a FedProf checkpoint, expected \"" +
                std::string(kMagicPrefix) + std::to_string(kCheckpointFormat) + "\"");
  }
  size_t pos = prefix_len;
  int64_t format = 0;
  while (pos < data.size() && pos < prefix_len + 9 && data[pos] >= '0' && data[pos] <= '9') {
    format = 10 * format + (data[pos++] - '0');
  }
  if (pos == prefix_len || pos >= data.size() || data[pos] != '\n') {
    throw Error(origin + ": byte " + std::to_string(pos) +
                ": bad first line, expected a format number and a line end");
  }
  if (format != kCheckpointFormat) {
    throw Error(origin + ": checkpoint format " + std::to_string(format) +
                (format < kCheckpointFormat
                     ? " is from an older FedProf without checksums, which this one no longer "
                       "resumes (it reads format "
                     : " is newer than this FedProf's (it reads format ") +
                std::to_string(kCheckpointFormat) + "); start a new run");
  }
  const size_t header_begin = pos + 1;

  // The checksum over everything before it catches truncation and bit flips
  // before anything else is read.
  if (data.size() < header_begin + kChecksumBytes) {
    throw Error(origin + ": byte " + std::to_string(data.size()) +
                ": truncated checkpoint, expected a header, the model and a 32-byte checksum");
  }
  const size_t body = data.size() - kChecksumBytes;
  const Sha256Digest expected = Sha256(data.substr(0, body));
  if (std::memcmp(expected.data(), data.data() + body, kChecksumBytes) != 0) {
    throw Error(origin + ": checksum mismatch (SHA-256 of bytes 0.." + std::to_string(body) +
                "): the file is corrupt or truncated; resume from an intact copy or start a new run");
  }

  const size_t eol = data.find('\n', header_begin);
  if (eol == std::string::npos || eol >= body) {
    throw Error(origin + ": byte " + std::to_string(header_begin) +
                ": header line without an end, expected JSON then a line end");
  }
  const Reader r(origin);
  DecodedCheckpoint out;
  ServerState& state = out.state;
  json h;
  try {
    h = json::parse(data.begin() + static_cast<std::ptrdiff_t>(header_begin),
                    data.begin() + static_cast<std::ptrdiff_t>(eol));
  } catch (const json::exception& e) {
    throw Error(origin + ": byte " + std::to_string(header_begin) + ": bad checkpoint header: " +
                e.what());
  }
  state.round = r.Int(h, "", "round", 0, kMaxRounds);
  for (const json& t : r.Array(h, "", "times_selected", kMaxClients)) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kMaxRounds) {
      r.Fail("times_selected", "an array of selection counts in 0.." + std::to_string(kMaxRounds));
    }
    state.times_selected.push_back(t.get<int64_t>());
  }
  state.virtual_time_s = r.Double(h, "", "virtual_time_s");
  state.energy_j = r.Double(h, "", "energy_j");
  state.strategy_state = r.String(h, "", "strategy_state");
  state.transport_state = r.String(h, "", "client_states");
  // Only runs of a TorchScript model (model.file) record its file's hash.
  if (h.contains("model_sha256")) state.model_sha256 = r.String(h, "", "model_sha256");
  if (!state.model_sha256.empty() && !IsFingerprint(state.model_sha256)) {
    r.Fail("model_sha256", "empty or 64 lower-case hex digits (a SHA-256)");
  }
  out.config_fingerprint = r.String(h, "", "config_fingerprint");
  if (!IsFingerprint(out.config_fingerprint)) {
    r.Fail("config_fingerprint", "64 lower-case hex digits (a SHA-256)");
  }
  const json& history = r.Array(h, "", "history", static_cast<size_t>(kMaxRounds));
  if (static_cast<int64_t>(history.size()) != state.round) {
    r.Fail("history", "one entry per completed round (" + std::to_string(state.round) + "), found " +
                          std::to_string(history.size()));
  }
  for (size_t i = 0; i < history.size(); ++i) {
    state.history.push_back(FromJson(r, history[i], "history[" + std::to_string(i) + "]."));
    if (state.history.back().round != static_cast<int64_t>(i) + 1) {
      r.Fail("history[" + std::to_string(i) + "].round", std::to_string(i + 1));
    }
  }
  ReadTraining(r, h, &state);
  const size_t model_bytes = body - eol - 1;
  const size_t count = 1 + state.training_models.size();
  const int64_t num_params =
      r.Int(h, "", "num_params", 0, static_cast<int64_t>(model_bytes / sizeof(float) / count));
  if (model_bytes != count * static_cast<size_t>(num_params) * sizeof(float)) {
    throw Error(origin + ": model section has " + std::to_string(model_bytes) + " bytes, header promises " +
                std::to_string(count) + " models of " + std::to_string(num_params) + " float32 values");
  }
  size_t at = eol + 1;
  for (FlatParams* model : ModelsOf(state)) {
    FlatParams& m = *model;
    m.resize(static_cast<size_t>(num_params));
    if (num_params > 0) std::memcpy(m.data(), data.data() + at, m.size() * sizeof(float));
    at += m.size() * sizeof(float);
    for (size_t i = 0; i < m.size(); ++i) {
      if (!std::isfinite(m[i])) throw Error(origin + ": model value " + std::to_string(i) + " is not finite");
    }
  }
  return out;
}

ServerState LoadCheckpoint(const std::string& path, const std::string& config_fingerprint) {
  DecodedCheckpoint c = DecodeCheckpoint(ReadFile(path), path);
  if (c.config_fingerprint != config_fingerprint) {
    throw Error(path + ": written by a run of another config (fingerprint " +
                c.config_fingerprint.substr(0, 12) + "..., config.toml's is " +
                config_fingerprint.substr(0, 12) +
                "...): only " + ResumableOptionsList() + " may change on --resume");
  }
  return std::move(c.state);
}

}  // namespace fedprof
