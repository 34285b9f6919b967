#include "fedprof/transport/tls.h"

#include <grpcpp/security/auth_context.h>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"

namespace fedprof {
namespace {

std::string ReadPem(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (!FileExists(path)) {
    throw Error(path + ": no such file (write the certificates with scripts/make-certs.sh " + dir +
                " N)");
  }
  std::string pem = ReadFile(path);
  if (pem.find("-----BEGIN") == std::string::npos) throw Error(path + ": not a PEM file");
  return pem;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::string& tls_dir) {
  if (tls_dir.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ReadPem(tls_dir, "ca.crt");
  options.pem_key_cert_pairs.push_back(
      {ReadPem(tls_dir, "server.key"), ReadPem(tls_dir, "server.crt")});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir, int id) {
  if (tls_dir.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  const std::string name = "client-" + std::to_string(id);
  options.pem_root_certs = ReadPem(tls_dir, "ca.crt");
  options.pem_private_key = ReadPem(tls_dir, name + ".key");
  options.pem_cert_chain = ReadPem(tls_dir, name + ".crt");
  return grpc::SslCredentials(options);
}

int CertifiedClientId(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return -1;
  const std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  if (names.size() != 1) return -1;
  const std::string cn(names[0].data(), names[0].size());
  const std::string prefix = "client-";
  if (cn.compare(0, prefix.size(), prefix) != 0 || cn.size() == prefix.size() ||
      cn.size() > prefix.size() + 9) {
    return -1;
  }
  int id = 0;
  for (size_t i = prefix.size(); i < cn.size(); ++i) {
    if (cn[i] < '0' || cn[i] > '9') return -1;
    id = id * 10 + (cn[i] - '0');
  }
  return id;
}

}  // namespace fedprof
