#ifndef FEDPROF_DEPLOY_SHARED_SECAGG_SETUP_H_
#define FEDPROF_DEPLOY_SHARED_SECAGG_SETUP_H_

// A secure-aggregation session's setup as a task carries it
// (proto/federation.proto, SecAggSetup): written by the server, read and
// checked by each client against its own policy before it takes part.

#include <cstdint>
#include <map>
#include <string>

#include "federation.pb.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {

// The setup a task carries: the session's config but the session id (each
// client derives it) and the tolerance (each party's own).
federation::v1::SecAggSetup SetupToWire(const secagg::SessionConfig& config, double reply_wait_s);
// A task's setup for round `round`, checked: sizes, counts and ids;
// `length` and `word_bits` must be the task's input's (SessionLength,
// SessionWordBits) and `own_id` among the clients;
// with a `roster` (tls.h's SecAggRoster) every verification key must be the
// roster's; k and t must be the ones the client's own `policy` gives for
// that many clients (secagg::CheckConfig). Throws fedprof::Error naming
// what was wrong.
secagg::SessionConfig SetupFromWire(const federation::v1::SecAggSetup& setup, int64_t length, int64_t own_id,
                                    int64_t round, const SecAggPolicy& policy,
                                    const std::map<int64_t, std::string>* roster = nullptr,
                                    int word_bits = 128);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SHARED_SECAGG_SETUP_H_
