#ifndef FEDPROF_DEPLOY_CLIENT_OPTIONS_H_
#define FEDPROF_DEPLOY_CLIENT_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "fedprof/privacy/client_ledger.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// How a deployed client runs (fedprof client; its own config).
struct GrpcClientOptions {
  std::string server;   // HOST:PORT
  // >= 0: `server` is relay `relay`, whose certificate the client expects
  // there (tls.h's RoleIdentity); else the server's.
  int relay = -1;
  // Directory of ca.crt, client-<id>.crt and client-<id>.key (mutual TLS);
  // empty: plaintext (loopback experiments only).
  std::string tls_dir;
  int id = -1;
  int64_t num_samples = 0;  // |D_k|, the claim the client registers with
  double speed_ghz = 0;     // optional device figures; 0 = not stated
  double bandwidth_mhz = 0;
  // SHA-256 (hex) of the TorchScript module this client would train
  // (model.file), stated at registration; empty = none.
  std::string model_sha256;
  // Keeps trying to reach the server this long (back-off from 0.25 s to
  // 5 heartbeat intervals, 1 to 10 s, with jitter, between tries) before
  // giving up, at the start and after losing it.
  double give_up_s = 300;
  // Asked after each failed try: true gives up at once, whatever give_up_s
  // (a node's run that its federation no longer offers at this address).
  std::function<bool()> withdrawn;
  // How long one task request may wait at the server (which caps it at
  // 30 s); heartbeats pause while one waits.
  double pull_wait_s = 25;
  bool progress = true;     // a line per task on stdout; of several clients, a line a round
  // What this client demands of secure aggregation, from its own config:
  // a task that breaks it is refused (a failed result saying why).
  SecAggPolicy secagg;
  // The file of what this client contributed to secure sums (its
  // ClientLedger); "" keeps it in memory. Its epsilons are at `ledger_delta`;
  // `budget` > 0: the most epsilon against the server it spends.
  std::string ledger;
  double ledger_delta = 1e-5;
  double budget = 0;
  ReportLimits reports;  // the most reports it answers under secure aggregation
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_OPTIONS_H_
