#include "fedprof/deploy/server/client_registry.h"

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/secagg/crypto.h"

namespace fedprof::deploy {

ClientRegistry::ClientRegistry(ServiceState* state, std::map<int64_t, std::string> roster)
    : state_(*state), options_(state->options), roster_(std::move(roster)), clients_(options_.num_clients) {}

grpc::Status ClientRegistry::CheckRegistration(int id, const pb::RegisterRequest& request) const {
  const std::string impossible =
      ClaimProblem(request.num_samples(), request.speed_ghz(), request.bandwidth_mhz(), options_.max_samples);
  if (!impossible.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, impossible);
  if (!request.model_sha256().empty() && !IsHex(request.model_sha256(), 64)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "model_sha256 '" + Printable(request.model_sha256(), 80) +
                            "' is not a SHA-256 (64 lowercase hexadecimal digits)");
  }
  const std::string module_mismatch = ModuleMismatch(id, request.model_sha256());
  if (!module_mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, module_mismatch);
  const std::string& verify_key = request.secagg_verify_key();
  if (!verify_key.empty() && verify_key.size() != secagg::kKeyBytes) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a secure aggregation verification key of " + std::to_string(verify_key.size()) +
                            " bytes; an Ed25519 key has " + std::to_string(secagg::kKeyBytes));
  }
  if (options_.secure_aggregation && verify_key.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this run aggregates securely (secagg.protocol) and the client sent no "
                        "verification key for it");
  }
  if (options_.secure_aggregation && state_.tls()) {
    const auto listed = roster_.find(id);
    if (listed == roster_.end() || listed->second != verify_key) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "its secure aggregation verification key is not the one secagg-roster "
                          "names for client " + std::to_string(id));
    }
  }
  return grpc::Status::OK;
}

grpc::Status ClientRegistry::Register(int id, const pb::RegisterRequest& request, Clock::time_point now,
                                      std::string* session) {
  ClientState& c = clients_[id];
  const int64_t n = request.num_samples();
  if (c.claimed > 0 && c.claimed != n) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "registered with " + std::to_string(c.claimed) +
                            " samples in this run; it may not claim " + std::to_string(n) + " now");
  }
  if (options_.max_clients > 0 && !Alive(id, now) && CountAlive(now) >= options_.max_clients) {
    // Retryable: the client backs off with jitter (client.cc).
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "the server holds its most connected clients, " +
                            std::to_string(options_.max_clients) + " (deploy.max_clients); retry in " +
                            FormatDouble(options_.heartbeat_timeout_s) + " s");
  }
  c.registered = true;
  c.relay = -1;  // directly now, whatever relay served it before
  c.claimed = n;
  c.num_samples = n;
  c.speed_ghz = request.speed_ghz();
  c.bandwidth_mhz = request.bandwidth_mhz();
  c.verify_key = request.secagg_verify_key();
  c.session = NewSession();
  c.last_seen = now;
  c.told_done = false;
  *session = c.session;
  return grpc::Status::OK;
}

void ClientRegistry::SyncRelay(int r, const pb::RelaySyncRequest& request, Clock::time_point now,
                               pb::RelaySyncReply* reply) {
  RelayState& relay = relays_[r];
  if (!request.session().empty() && request.session() != relay.session) {
    reply->set_status(pb::UNKNOWN_SESSION);  // the server restarted: sync afresh
    return;
  }
  if (request.session().empty()) {  // a relay (re)starting: what it served before is gone
    relay.session = NewSession();
    relay.clients.clear();
  }
  relay.last_seen = now;
  int alive = options_.max_clients > 0 ? CountAlive(now) : 0;
  std::set<int> serving;
  for (const pb::RelayedClient& c : request.clients()) {
    const bool was_alive = Alive(c.client_id(), now);
    const std::string why = TakeRelayed(r, c, was_alive, alive, now);
    if (why.empty()) {
      serving.insert(c.client_id());
      alive += was_alive ? 0 : 1;
    } else {
      reply->add_refused_ids(c.client_id());
      reply->add_refused_reasons(why);
    }
  }
  relay.clients = std::move(serving);
  reply->set_session(relay.session);
  reply->set_status(state_.Next());
  if (state_.done) TellRelayDone(r);
}

std::string ClientRegistry::TakeRelayed(int r, const pb::RelayedClient& c, bool was_alive, int alive,
                                        Clock::time_point now) {
  const int id = c.client_id();
  ClientState& state = clients_[id];
  const int64_t n = c.num_samples();
  const std::string impossible = ClaimProblem(n, c.speed_ghz(), c.bandwidth_mhz(), options_.max_samples);
  if (!impossible.empty()) return impossible;
  if (state.claimed > 0 && state.claimed != n) {
    return "registered with " + std::to_string(state.claimed) + " samples in this run; it may not claim " +
           std::to_string(n) + " now";
  }
  if (was_alive && state.relay != r) {
    return state.relay < 0 ? "registered with the server directly"
                           : "served by relay " + std::to_string(state.relay);
  }
  if (!was_alive && options_.max_clients > 0 && alive >= options_.max_clients) {
    return "the server holds its most connected clients, " + std::to_string(options_.max_clients) +
           " (deploy.max_clients)";
  }
  if (!was_alive) state.told_done = false;
  state.registered = true;
  state.relay = r;
  state.claimed = n;
  state.num_samples = n;
  state.speed_ghz = c.speed_ghz();
  state.bandwidth_mhz = c.bandwidth_mhz();
  state.session.clear();  // it speaks to the server only through its relay
  state.last_seen = now;
  return "";
}

pb::Status ClientRegistry::TouchRelay(int r, const std::string& session) {
  RelayState& relay = relays_[r];
  if (relay.session.empty() || session != relay.session) return pb::UNKNOWN_SESSION;
  relay.last_seen = Clock::now();
  return state_.Next();
}

void ClientRegistry::TellRelayDone(int r) {
  for (int id : relays_[r].clients) clients_[id].told_done = true;
  state_.arrive_cv.notify_all();
}

pb::Status ClientRegistry::Touch(int id, const std::string& session) {
  ClientState& c = clients_[id];
  if (!c.registered || session != c.session) return pb::UNKNOWN_SESSION;
  c.last_seen = Clock::now();
  if (state_.done) {
    c.told_done = true;
    state_.arrive_cv.notify_all();
  }
  return state_.Next();
}

bool ClientRegistry::Alive(int id, Clock::time_point now) const {
  const ClientState& c = clients_[id];
  if (c.relay >= 0) {
    const auto it = relays_.find(c.relay);
    return c.registered && RelayAlive(c.relay, now) && it->second.clients.count(id) > 0;
  }
  return c.registered && (now - c.last_seen <= Seconds(options_.heartbeat_timeout_s) || c.waiting);
}

bool ClientRegistry::RelayAlive(int r, Clock::time_point now) const {
  const auto it = relays_.find(r);
  return it != relays_.end() &&
         (now - it->second.last_seen <= Seconds(options_.heartbeat_timeout_s) || it->second.waiting);
}

int ClientRegistry::CountAlive(Clock::time_point now) const {
  int n = 0;
  for (int id = 0; id < options_.num_clients; ++id) n += Alive(id, now) ? 1 : 0;
  return n;
}

std::vector<ClientInfo> ClientRegistry::Available(Clock::time_point now) const {
  std::vector<ClientInfo> out;
  for (int id = 0; id < options_.num_clients; ++id) {
    if (Alive(id, now)) out.push_back({id, clients_[id].num_samples, clients_[id].last_round_s});
  }
  return out;
}

bool ClientRegistry::AllToldDone(Clock::time_point now) const {
  for (int id = 0; id < options_.num_clients; ++id) {
    if (Alive(id, now) && !clients_[id].told_done) return false;
  }
  return true;
}

void ClientRegistry::CountRound(int id, double round_s) {
  ClientState& c = clients_[id];
  c.last_round_s = round_s;
  c.total_round_s += round_s;
  c.results += 1;
}

std::vector<ClientDescription> ClientRegistry::Describe() const {
  std::vector<ClientDescription> out(clients_.size());
  for (size_t k = 0; k < clients_.size(); ++k) {
    const ClientState& c = clients_[k];
    out[k].size = c.num_samples;
    out[k].speed_ghz = c.speed_ghz;
    out[k].bandwidth_mhz = c.bandwidth_mhz;
    out[k].round_s = c.results > 0 ? c.total_round_s / c.results : 0.0;
  }
  return out;
}

void ClientRegistry::SaveClaims(nlohmann::json* claims) const {
  for (size_t k = 0; k < clients_.size(); ++k) {
    if (clients_[k].claimed > 0) (*claims)[std::to_string(k)] = clients_[k].claimed;
  }
}

void ClientRegistry::LoadClaim(const std::string& key, const nlohmann::json& value) {
  const int id = ParseClientId(key, options_.num_clients);
  if (id < 0) throw Error("checkpoint: claim of client '" + Printable(key) + "'");
  const int64_t n = value.get<int64_t>();
  if (n < 1 || n > options_.max_samples) throw Error("checkpoint: claim of client " + key);
  clients_[id].claimed = n;
}

void ClientRegistry::FillRegisterReply(const std::string& session, const secagg::Bytes& run_id,
                                       pb::RegisterReply* reply) const {
  reply->set_protocol_version(kProtocolVersion);
  reply->set_session(session);
  reply->set_run_id(std::string(run_id.begin(), run_id.end()));
  reply->set_heartbeat_s(options_.heartbeat_s);
  reply->set_num_params(options_.num_params);
  reply->set_chunk_bytes(static_cast<int64_t>(options_.chunk_bytes));
  pb::ModelSpec* m = reply->mutable_model();
  m->set_name(options_.model.name);
  *m->mutable_input_shape() = {options_.model.input_shape.begin(), options_.model.input_shape.end()};
  m->set_outputs(options_.model.outputs);
  *m->mutable_hidden() = {options_.model.hidden.begin(), options_.model.hidden.end()};
  m->set_profile_layer(options_.model.profile_layer);
  m->set_width(options_.model.width);
  m->set_file_sha256(options_.model.file_sha256);
  ToWire(options_.features, reply->mutable_features());
}

std::string ClientRegistry::ModuleMismatch(int id, const std::string& sha256) const {
  const std::string client = "client " + std::to_string(id);
  const std::string& ours = options_.model.file_sha256;
  if (ours.empty()) {
    return sha256.empty() ? ""
                          : client + " names a model.file (SHA-256 " + sha256 +
                                "), but the server trains the built-in model " + options_.model.name +
                                "; drop model.file from its config";
  }
  if (sha256 == ours) return "";
  return client + (sha256.empty() ? " has no model.file" : "'s model.file has SHA-256 " + sha256) +
         ", but the server trains the TorchScript module with SHA-256 " + ours +
         "; give the client the same file (--set model.file=PATH)";
}

}  // namespace fedprof::deploy
