#include "fedprof/server/checkpoint.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"

namespace fedprof {
namespace {

constexpr char kMagic[] = "FEDPROF-CHECKPOINT 1\n";

nlohmann::json ToJson(const RoundMetrics& m) {
  return {{"round", m.round},
          {"lr", m.lr},
          {"selected", m.selected},
          {"returned", m.returned},
          {"refused", m.refused},
          {"timed_out", m.timed_out},
          {"train_loss", m.train_loss},
          {"evaluated", m.evaluated},
          {"accuracy", m.accuracy},
          {"loss", m.loss},
          {"rmse", m.rmse},
          {"round_time_s", m.round_time_s},
          {"virtual_time_s", m.virtual_time_s},
          {"round_energy_wh", m.round_energy_wh},
          {"profiling_time_s", m.profiling_time_s},
          {"profiling_energy_wh", m.profiling_energy_wh},
          {"energy_wh", m.energy_wh},
          {"wall_s", m.wall_s}};
}

RoundMetrics FromJson(const nlohmann::json& j) {
  RoundMetrics m;
  m.round = j.at("round");
  m.lr = j.at("lr");
  m.selected = j.at("selected");
  m.returned = j.at("returned");
  m.refused = j.at("refused");
  m.timed_out = j.at("timed_out");
  m.train_loss = j.at("train_loss");
  m.evaluated = j.at("evaluated");
  m.accuracy = j.at("accuracy");
  m.loss = j.at("loss");
  m.rmse = j.at("rmse");
  m.round_time_s = j.at("round_time_s");
  m.virtual_time_s = j.at("virtual_time_s");
  m.round_energy_wh = j.at("round_energy_wh");
  m.profiling_time_s = j.at("profiling_time_s");
  m.profiling_energy_wh = j.at("profiling_energy_wh");
  m.energy_wh = j.at("energy_wh");
  m.wall_s = j.at("wall_s");
  return m;
}

}  // namespace

void SaveCheckpoint(const std::string& path, const ServerState& state) {
  nlohmann::json header = {{"round", state.round},
                           {"num_params", state.global.size()},
                           {"times_selected", state.times_selected},
                           {"virtual_time_s", state.virtual_time_s},
                           {"energy_j", state.energy_j},
                           {"strategy_state", state.strategy_state},
                           {"client_states", state.client_states},
                           {"history", nlohmann::json::array()}};
  for (const auto& m : state.history) header["history"].push_back(ToJson(m));
  if (!state.model_sha256.empty()) header["model_sha256"] = state.model_sha256;
  // dump() of doubles round-trips exactly (shortest representation).
  std::string out = kMagic;
  out += header.dump();
  out += '\n';
  const size_t bytes = state.global.size() * sizeof(float);
  const size_t at = out.size();
  out.resize(at + bytes);
  std::memcpy(&out[at], state.global.data(), bytes);
  WriteFileAtomic(path, out);
}

ServerState LoadCheckpoint(const std::string& path) {
  const std::string data = ReadFile(path);
  const size_t magic_len = sizeof(kMagic) - 1;
  if (data.compare(0, magic_len, kMagic) != 0) {
    throw Error(path + ": not a FedProf checkpoint (bad first line)");
  }
  const size_t eol = data.find('\n', magic_len);
  if (eol == std::string::npos) throw Error(path + ": truncated checkpoint header");
  ServerState state;
  try {
    const nlohmann::json h = nlohmann::json::parse(data.substr(magic_len, eol - magic_len));
    state.round = h.at("round");
    state.times_selected = h.at("times_selected").get<std::vector<int64_t>>();
    state.virtual_time_s = h.at("virtual_time_s");
    state.energy_j = h.at("energy_j");
    state.strategy_state = h.at("strategy_state");
    state.client_states = h.at("client_states");
    state.model_sha256 = h.value("model_sha256", "");
    for (const auto& m : h.at("history")) state.history.push_back(FromJson(m));
    const size_t num_params = h.at("num_params");
    const size_t bytes = num_params * sizeof(float);
    if (data.size() - eol - 1 != bytes) {
      throw Error(path + ": model section has " + std::to_string(data.size() - eol - 1) +
                  " bytes, header promises " + std::to_string(bytes));
    }
    state.global.resize(num_params);
    std::memcpy(state.global.data(), data.data() + eol + 1, bytes);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": bad checkpoint header: " + e.what());
  }
  return state;
}

}  // namespace fedprof
