#ifndef FEDPROF_DEPLOY_SHARED_TLS_H_
#define FEDPROF_DEPLOY_SHARED_TLS_H_

// Mutual TLS for the deployment, from the files scripts/make-certs.sh
// writes, and the keys each client makes for itself (fedprof keygen). For
// the gRPC transport's .cc files and the tool's deployment commands only.
// Every server and channel is made with these credentials, so they also
// prepare gRPC's runtime for the process, once (PrepareGrpcRuntime).

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fedprof {

// Sets gRPC's runtime up for this process (once; later calls do nothing).
void PrepareGrpcRuntime();

// The name every peer checks in the certificate of a role, "server" or
// "relay-<r>": <role>.fedprof.invalid (scripts/make-certs.sh gives the
// server's certificate and each relay's their own, and only their own). A
// client or relay connects to whatever host or address it was given, and
// accepts only the certificate that names the role it expects there: a
// relay's key cannot pose as the server, nor one relay as another.
std::string RoleIdentity(const std::string& role);
// Makes a channel of `args` accept only `role`'s certificate (under TLS,
// `tls_dir` not empty).
void ExpectPeer(const std::string& tls_dir, const std::string& role, grpc::ChannelArguments* args);

// The server's credentials from DIR/ca.crt, <name>.crt, <name>.key (the
// server's, or relay-<r>'s when a relay serves its clients): it presents
// <name>.crt and requires a client certificate signed by ca.crt. An empty
// `tls_dir` gives plaintext credentials. Throws fedprof::Error naming a
// missing or unreadable file, or a certificate that does not name its role
// (RoleIdentity).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::string& tls_dir,
                                                           const std::string& name = "server");

// Client `id`'s credentials from DIR/ca.crt, client-<id>.crt, client-<id>.key:
// it trusts only servers certified by ca.crt. Empty `tls_dir`: plaintext.
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir, int id);
// The same for the certificate <name>.crt (a relay's, towards its server).
std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir,
                                                            const std::string& name);

// Who the peer's verified certificate says it is. The id is read strictly:
// the subject holds exactly one common name, "client-<id>" (or a relay's
// "relay-<r>") with the number in canonical decimal (no sign, no leading
// zero, at most 9 digits), as scripts/make-certs.sh writes it. Otherwise
// `id` and `relay` are -1 and `problem` says why (no certificate, no CN, two
// CNs, "client-01", ...).
struct CertifiedPeer {
  int id = -1;     // a client's certificate
  int relay = -1;  // a relay's
  std::string operator_name;  // an operator's, "operator-<name>" (a federation's)
  std::string problem;
  std::string sha256;  // of the certificate's DER encoding (hex), when there is one
};
CertifiedPeer CertifiedClient(const grpc::ServerContextBase& context);

// What a federation reads of a node's certificate before it enrols it: who
// it names (as CertifiedClient reads it) and when it expires, its
// fingerprint, and whether `ca_pem` signed it and it is valid now (`problem`
// says why not). Never throws on bad input.
struct CertificateFacts {
  CertifiedPeer peer;
  std::string not_after;  // ISO 8601, UTC
  std::string problem;    // "" when it is sound and the CA's
};
CertificateFacts ReadCertificate(const std::string& pem, const std::string& ca_pem);

// An operator's name as its certificate gives it (operator-<name>): 1 to 32
// of a-z, 0-9, '-' and '_'.
bool IsOperatorName(const std::string& name);

// Whether HOST:PORT names this machine's loopback (127.x, [::1],
// localhost): the only addresses --insecure may use.
bool IsLoopbackAddress(const std::string& host_port);

// Secure aggregation's keys, issued with the certificates so that they do
// not depend on the server: client <id>'s Ed25519 signing key
// DIR/client-<id>.secagg.key (PEM; returned raw, 32 bytes each half), and
// DIR/secagg-roster, every client's verification key ("K KEY" a line, KEY
// the base64 of its SubjectPublicKeyInfo; returned raw by client). Each
// throws fedprof::Error naming the file and what is wrong with it.
struct SecAggKeyPair {
  std::string secret;
  std::string public_key;
};
SecAggKeyPair SecAggSigningKey(const std::string& tls_dir, int id);
std::map<int64_t, std::string> SecAggRoster(const std::string& tls_dir);

// Client `id`'s keys, made on its own machine (fedprof keygen): in `dir`
// (made if missing), client-<id>.key (its TLS key, EC P-256),
// client-<id>.secagg.key (its Ed25519 signing key) and client-<id>.dp.key
// (its DP noise key, dp.noise = keyed), each readable by the owner only and
// never to leave the machine; client-<id>.csr (a certificate request,
// CN=client-<id>, signed with the TLS key) and client-<id>.secagg.pub (its
// roster line "<id> KEY") for the certificate authority, which signs the one
// and lists the other in secagg-roster (scripts/make-certs.sh --sign).
// Refuses to replace an existing key; throws fedprof::Error naming the file.
// Returns the files written, the two for the CA last.
std::vector<std::string> GenerateClientKeys(const std::string& dir, int id);

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SHARED_TLS_H_
