#ifndef FEDPROF_TRANSPORT_TLS_H_
#define FEDPROF_TRANSPORT_TLS_H_

// Mutual TLS for the deployment, from the files scripts/make-certs.sh
// writes. For the gRPC transport's .cc files only.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <string>

namespace fedprof {

// The server's credentials from DIR/ca.crt, server.crt, server.key: it
// presents server.crt and requires a client certificate signed by ca.crt.
// An empty `tls_dir` gives plaintext credentials. Throws fedprof::Error
// naming a missing or unreadable file.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::string& tls_dir);

// Client `id`'s credentials from DIR/ca.crt, client-<id>.crt, client-<id>.key:
// it trusts only servers certified by ca.crt. Empty `tls_dir`: plaintext.
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir, int id);

// The client id the peer's verified certificate names (subject CN
// "client-<id>"), -1 when the connection carries no such certificate.
int CertifiedClientId(const grpc::ServerContext& context);

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_TLS_H_
