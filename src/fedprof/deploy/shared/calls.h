#ifndef FEDPROF_DEPLOY_SHARED_CALLS_H_
#define FEDPROF_DEPLOY_SHARED_CALLS_H_

// What the deployment's callers (clients, relays) make of a gRPC call's
// deadline and ending, and the channel they call on. For the gRPC
// transport's .cc files only.

#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <string>

#include "fedprof/core/text.h"

namespace fedprof {

// A call's deadline `seconds` from now.
inline std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

// A caller's channel arguments: the server's chunks and headers stay below
// the message limit.
inline grpc::ChannelArguments CallerChannelArguments() {
  grpc::ChannelArguments args;
  const int limit = 8 << 20;
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  return args;
}

// What a status says, as a caller may log it: the server's words are not
// trusted to be one line either.
inline std::string Said(const grpc::Status& s) { return Printable(s.error_message(), 400); }

// Refusals no retry can mend.
inline bool Permanent(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return true;
    default:
      return false;
  }
}

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SHARED_CALLS_H_
