#include "fedprof/deploy/server/admission.h"

#include <random>

#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

bool IsHex(const std::string& s, size_t digits) {
  return s.size() == digits && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string NewSession() {
  std::random_device device;  // the OS's generator
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s += hex[device() % 16];
  return s;
}

std::string Caller(const grpc::ServerContextBase& context, bool tls) {
  if (tls) {
    const CertifiedPeer peer = CertifiedClient(context);
    if (peer.id >= 0) return "client " + std::to_string(peer.id);
    if (peer.relay >= 0) return "relay " + std::to_string(peer.relay);
    return "peer " + Printable(context.peer(), 64) + " (" + peer.problem + ")";
  }
  return "peer " + Printable(context.peer(), 64);
}

grpc::Status CheckSize(const google::protobuf::Message& request, size_t limit, const std::string& what) {
  const size_t size = request.ByteSizeLong();
  if (size <= limit) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      what + " of " + std::to_string(size) + " bytes, over its limit of " +
                          std::to_string(limit));
}

grpc::Status CheckSession(const std::string& session) {
  if (IsHex(session, 32)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "session '" + Printable(session, 40) + "' is not one this server issues");
}

grpc::Status Authenticate(const grpc::ServerContextBase& context, bool tls, int num_clients, uint32_t version,
                          int claimed, int* id, AccessList* access) {
  const std::string mismatch = ProtocolMismatch(version, "the client");
  if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
  if (tls) {
    const CertifiedPeer peer = CertifiedClient(context);
    if (peer.id < 0) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, peer.problem);
    if (peer.id != claimed) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "certificate of client " + std::to_string(peer.id) + " used to speak as client " +
                              std::to_string(claimed));
    }
    const std::string refused = access ? access->Refusal(peer.id, peer.sha256) : "";
    if (!refused.empty()) return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, refused);
  }
  if (claimed < 0 || claimed >= num_clients) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "client id " + std::to_string(claimed) + " is not one of 0.." +
                            std::to_string(num_clients - 1) + " (clients.count)");
  }
  *id = claimed;
  return grpc::Status::OK;
}

grpc::Status AuthenticateRelay(const grpc::ServerContextBase& context, bool tls, uint32_t version,
                               int claimed, int* relay) {
  const std::string mismatch = ProtocolMismatch(version, "the relay");
  if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
  if (tls) {
    const CertifiedPeer peer = CertifiedClient(context);
    if (peer.relay < 0) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "only a relay's certificate may make a relay's calls" +
                              (peer.problem.empty() ? "" : " (" + peer.problem + ")"));
    }
    if (peer.relay != claimed) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "certificate of relay " + std::to_string(peer.relay) + " used to speak as relay " +
                              std::to_string(claimed));
    }
  }
  if (claimed < 0 || claimed >= 1000000000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "relay id " + std::to_string(claimed));
  }
  *relay = claimed;
  return grpc::Status::OK;
}

FitResult Failed(int id, const std::string& why, bool timed_out) {
  FitResult r;
  r.client_id = id;
  r.ok = false;
  r.timed_out = timed_out;
  r.error = why;
  return r;
}

namespace {

std::string CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return "invalid argument";
    case grpc::StatusCode::FAILED_PRECONDITION: return "failed precondition";
    case grpc::StatusCode::PERMISSION_DENIED: return "permission denied";
    case grpc::StatusCode::UNAUTHENTICATED: return "unauthenticated";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "over a limit";
    case grpc::StatusCode::INTERNAL: return "malformed";
    case grpc::StatusCode::UNIMPLEMENTED: return "unknown method";
    default: return "status " + std::to_string(static_cast<int>(code));
  }
}

class RefusalInterceptor final : public grpc::experimental::Interceptor {
 public:
  RefusalInterceptor(grpc::experimental::ServerRpcInfo* info, RefusalLog* log, bool tls)
      : info_(info), log_(log), tls_(tls) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      LogIfRefused(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  void LogIfRefused(const grpc::Status& status) {
    // A call its client gave up on is a client that went away, not a
    // refusal: cancelled, or ended by gRPC as UNIMPLEMENTED (without a
    // word) because its request never arrived before the client cancelled
    // it or its deadline passed, whatever its method. A request that came
    // and does not parse ends the same way uncancelled: that is refused.
    const grpc::ServerContextBase& context = *info_->server_context();
    const bool abandoned =
        status.error_code() == grpc::StatusCode::CANCELLED ||
        (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && status.error_message().empty() &&
         (context.IsCancelled() || context.deadline() < std::chrono::system_clock::now()));
    if (status.ok() || abandoned) return;
    std::string method = info_->method() ? info_->method() : "?";
    method = method.substr(method.rfind('/') + 1);
    // gRPC's own refusals of a request that does not parse say nothing;
    // its UNIMPLEMENTED then means it could not read one, not that the
    // method is unknown (the service has every method it registers).
    const std::string& why = status.error_message();
    const bool unreadable = why.empty() && status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
    const std::string kind = unreadable ? "unreadable" : CodeName(status.error_code());
    const std::string said = unreadable ? "no readable request (not a message, or cut off: its client may "
                                          "have given up on it)"
                             : why.empty() ? "a request that is " + kind
                                           : Printable(why, 400);
    log_->Refuse(Caller(context, tls_), method + " " + kind, method + ": " + said);
  }

  grpc::experimental::ServerRpcInfo* info_;
  RefusalLog* log_;
  bool tls_;
};

}  // namespace

grpc::experimental::Interceptor* RefusalInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new RefusalInterceptor(info, log_, tls_);
}

}  // namespace fedprof::deploy
