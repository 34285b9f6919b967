#ifndef FEDPROF_DEPLOY_SERVER_ADMISSION_H_
#define FEDPROF_DEPLOY_SERVER_ADMISSION_H_

// What every call to the server passes before anything of it is believed:
// its size against its call's bound, who its certificate says it is, its
// protocol version, its session's form. And the log of every call the
// server refuses (RefusalInterceptor). For the server's parts only.

#include <grpcpp/grpcpp.h>
#include <google/protobuf/message.h>
#include <grpcpp/support/server_interceptor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fedprof/deploy/server/access_list.h"
#include "fedprof/deploy/server/refusal_log.h"
#include "fedprof/protocol/messages.h"

namespace fedprof::deploy {

using Clock = std::chrono::steady_clock;

inline Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}
inline double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// What each call may weigh. gRPC bounds every message of a port by one limit
// (the model chunks' size); these bound each call's own request on arrival.
constexpr size_t kMaxRegisterBytes = 1024;     // numbers and a 64-digit hash
constexpr size_t kMaxSmallRequestBytes = 256;  // Heartbeat, PullTask: numbers and a session
// Room beside a model chunk for a result header (a profile of 2^16 units, a
// sketch of 2^16 values or a ciphertext).
constexpr size_t kHeaderAllowance = size_t{1} << 20;

// `digits` lowercase hexadecimal digits (a SHA-256 has 64, a session 32).
bool IsHex(const std::string& s, size_t digits);

// A registration's (or a relay's) fresh session: 32 hex digits from the OS's
// generator.
std::string NewSession();

// Who is calling, for the log: the client or relay its certificate names,
// or the peer's address (and why no certificate named a client).
std::string Caller(const grpc::ServerContextBase& context, bool tls);

// A request over its call's own bound is refused before any field of it is
// looked at.
grpc::Status CheckSize(const google::protobuf::Message& request, size_t limit, const std::string& what);

// Sessions are the server's own (NewSession): anything else is malformed.
grpc::Status CheckSession(const std::string& session);

// The id of the calling client (*id): its certificate's under TLS, which
// must equal the id it claims, or the claim itself without TLS; one of
// 0 .. num_clients − 1; speaking this protocol version; served by the
// federation's access list (`access`: enrolled with this certificate, not
// revoked), when the server has one.
grpc::Status Authenticate(const grpc::ServerContextBase& context, bool tls, int num_clients, uint32_t version,
                          int claimed, int* id, AccessList* access);
// The same for a relay (*relay), whose certificate names it relay-<r>.
grpc::Status AuthenticateRelay(const grpc::ServerContextBase& context, bool tls, uint32_t version,
                               int claimed, int* relay);

// A failed result of client `id`, saying why.
FitResult Failed(int id, const std::string& why, bool timed_out);

// Logs every refused call, by caller, through the server's RefusalLog: the
// statuses the handlers return, and gRPC's own for a request that does not
// parse (a unary request over the port's limit is dropped by gRPC before
// any of this runs: docs/deploy.md).
class RefusalInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RefusalInterceptorFactory(RefusalLog* log, bool tls) : log_(log), tls_(tls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  RefusalLog* log_;
  bool tls_;
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_ADMISSION_H_
