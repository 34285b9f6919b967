#ifndef FEDPROF_DEPLOY_SERVER_CLIENT_REGISTRY_H_
#define FEDPROF_DEPLOY_SERVER_CLIENT_REGISTRY_H_

// Who the server's clients and relays are: what each registered (its
// sample count, fixed for the run, and its device), its session, when it
// was last heard from, and so whether it is there. Registrations and relay
// syncs are checked here before anything of them is kept. Functions marked
// (mutex held) expect ServiceState::mutex; the others touch no state.

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fedprof/deploy/server/service_state.h"

namespace fedprof::deploy {

class ClientRegistry {
 public:
  // `roster`: the clients' secure aggregation keys as issued with their
  // certificates (tls.h's SecAggRoster), for runs that aggregate securely
  // under TLS.
  ClientRegistry(ServiceState* state, std::map<int64_t, std::string> roster);

  // The checks of a registration that need no state: its claims, its
  // model's hash against the server's, its secure aggregation key.
  grpc::Status CheckRegistration(int id, const pb::RegisterRequest& request) const;
  // Registers client `id` directly (a checked request) with a new session
  // (*session), unless it changes its claim or the server holds its most
  // clients. (mutex held)
  grpc::Status Register(int id, const pb::RegisterRequest& request, Clock::time_point now,
                        std::string* session);

  // Relay `r`'s sync (a checked request) under `session` ("": it starts):
  // fills `reply` with its session, its status and the clients it may not
  // serve, each with why. (mutex held)
  void SyncRelay(int r, const pb::RelaySyncRequest& request, Clock::time_point now,
                 pb::RelaySyncReply* reply);
  // Relay `r` heard from under `session`; what it should do next. (mutex held)
  pb::Status TouchRelay(int r, const std::string& session);
  // Relay `r` has heard that the run is done, and so, through it, have its
  // clients. (mutex held)
  void TellRelayDone(int r);

  // Marks client `id` as heard from under `session`; what it should do
  // next. (mutex held)
  pb::Status Touch(int id, const std::string& session);
  // Client `id` (relay `r`) was heard from now: a parked request of its was
  // answered. (mutex held)
  void Heard(int id, Clock::time_point now) { clients_[id].last_seen = now; }
  void HeardRelay(int r, Clock::time_point now) { relays_[r].last_seen = now; }
  // Whether a task (batch) request of client `id` (relay `r`) waits at the
  // server: it is there while one does. (mutex held)
  void SetWaiting(int id, bool waiting) { clients_[id].waiting = waiting; }
  void SetRelayWaiting(int r, bool waiting) { relays_[r].waiting = waiting; }

  // Client `id` is there while it is heard from, or while a task request
  // of its waits at the server; a relayed one while its relay is there and
  // says it is. (mutex held)
  bool Alive(int id, Clock::time_point now) const;
  bool RelayAlive(int r, Clock::time_point now) const;
  int CountAlive(Clock::time_point now) const;
  std::vector<ClientInfo> Available(Clock::time_point now) const;
  // Whether every client there has heard that the run is done. (mutex held)
  bool AllToldDone(Clock::time_point now) const;
  void ToldDone(int id) { clients_[id].told_done = true; }

  // The relay serving client `id`, or -1; the sample count it registered;
  // its secure aggregation verification key. (mutex held)
  int RelayOf(int id) const { return clients_[id].relay; }
  int64_t SamplesOf(int id) const { return clients_[id].num_samples; }
  const std::string& VerifyKeyOf(int id) const { return clients_[id].verify_key; }
  // Client `id` delivered a result after `round_s` seconds. (mutex held)
  void CountRound(int id, double round_s);

  std::vector<ClientDescription> Describe() const;  // (mutex held)
  // The clients' claims by id, and back (checked: a claim of a client of
  // this run, within max_samples). (mutex held)
  void SaveClaims(nlohmann::json* claims) const;
  void LoadClaim(const std::string& key, const nlohmann::json& value);

  // A registration's settings: the session, and the model and settings the
  // client is to use.
  void FillRegisterReply(const std::string& session, const secagg::Bytes& run_id, pb::RegisterReply* reply) const;

 private:
  struct ClientState {
    bool registered = false;
    int64_t claimed = 0;  // samples claimed in this run (kept across restarts)
    int64_t num_samples = 0;
    double speed_ghz = 0;
    double bandwidth_mhz = 0;
    std::string session;
    Clock::time_point last_seen;
    bool waiting = false;  // a task request of its is parked
    double last_round_s = -1;
    double total_round_s = 0;
    int64_t results = 0;
    bool told_done = false;
    int relay = -1;          // the relay it is served through, or -1: directly
    std::string verify_key;  // for secure aggregation, as registered
  };
  struct RelayState {
    std::string session;
    Clock::time_point last_seen;
    bool waiting = false;   // a batch request of its is parked
    std::set<int> clients;  // as of its last sync
  };

  // Why client `id`, whose model.file has SHA-256 `sha256` ("" = none, else
  // 64 hex digits), cannot build the server's model, or "".
  std::string ModuleMismatch(int id, const std::string& sha256) const;
  // Why relay `r` may not serve client `c` now, or "" once it does: the
  // checks of a registration, and a client is served one way at a time.
  std::string TakeRelayed(int r, const pb::RelayedClient& c, bool was_alive, int alive,
                          Clock::time_point now);

  ServiceState& state_;
  const GrpcServerOptions& options_;
  const std::map<int64_t, std::string> roster_;
  std::vector<ClientState> clients_;
  std::map<int, RelayState> relays_;  // by relay id
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_CLIENT_REGISTRY_H_
