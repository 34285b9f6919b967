#include "fedprof/deploy/shared/tls.h"

#include <absl/synchronization/mutex.h>
#include <grpcpp/security/auth_context.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"
#include "fedprof/privacy/noise_source.h"

namespace fedprof {
namespace {

std::string ReadPem(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  if (!FileExists(path)) {
    // A party's own key is made on its machine; the one-machine tool writes everyone's.
    throw Error(path + ": no such file (" +
                (name.rfind("client-", 0) == 0
                     ? "a client makes its keys on its own machine, fedprof keygen --id K --out " + dir +
                           ", and the CA signs them, scripts/make-certs.sh --sign: docs/guide-deploy.md"
                     : "scripts/make-certs.sh writes it") +
                ")");
  }
  std::string pem = ReadFile(path);
  if (pem.find("-----BEGIN") == std::string::npos) throw Error(path + ": not a PEM file");
  return pem;
}

using Pkey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// A raw Ed25519 key (32 bytes) of `key`, its private or public half.
std::string RawEd25519(EVP_PKEY* key, bool secret, const std::string& where) {
  if (key == nullptr || EVP_PKEY_id(key) != EVP_PKEY_ED25519) throw Error(where + ": not an Ed25519 key");
  std::string raw(32, '\0');
  size_t size = raw.size();
  auto* out = reinterpret_cast<unsigned char*>(raw.data());
  const int ok = secret ? EVP_PKEY_get_raw_private_key(key, out, &size)
                        : EVP_PKEY_get_raw_public_key(key, out, &size);
  if (ok != 1 || size != raw.size()) throw Error(where + ": not an Ed25519 key");
  return raw;
}

}  // namespace

SecAggKeyPair SecAggSigningKey(const std::string& tls_dir, int id) {
  const std::string name = "client-" + std::to_string(id) + ".secagg.key";
  const std::string pem = ReadPem(tls_dir, name);
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  Pkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, &EVP_PKEY_free);
  const std::string where = tls_dir + "/" + name;
  return {RawEd25519(key.get(), /*secret=*/true, where), RawEd25519(key.get(), /*secret=*/false, where)};
}

std::map<int64_t, std::string> SecAggRoster(const std::string& tls_dir) {
  const std::string path = tls_dir + "/secagg-roster";
  if (!FileExists(path)) {
    throw Error(path + ": no such file (scripts/make-certs.sh writes it with the certificates)");
  }
  std::map<int64_t, std::string> roster;
  std::istringstream lines(ReadFile(path));
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    const std::string where = path + " line " + std::to_string(++number);
    std::istringstream fields(line);
    std::string id_text, base64, rest;
    fields >> id_text >> base64;
    if (fields >> rest || base64.empty() || base64.size() > 256) throw Error(where + ": not 'K KEY'");
    const int id = ParseClientId(id_text, 1000000000);
    if (id < 0) throw Error(where + ": '" + Printable(id_text, 20) + "' is not a client id");
    std::string der(base64.size(), '\0');
    const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(der.data()),
                                        reinterpret_cast<const unsigned char*>(base64.data()),
                                        static_cast<int>(base64.size()));
    if (decoded < 0) throw Error(where + ": the key is not base64");
    // EVP_DecodeBlock counts the bytes of '=' padding as zeros.
    const size_t padding = static_cast<size_t>(std::count(base64.end() - std::min<size_t>(2, base64.size()),
                                                          base64.end(), '='));
    const auto* p = reinterpret_cast<const unsigned char*>(der.data());
    Pkey key(d2i_PUBKEY(nullptr, &p, static_cast<long>(static_cast<size_t>(decoded) - padding)),
             &EVP_PKEY_free);
    if (!roster.emplace(id, RawEd25519(key.get(), /*secret=*/false, where)).second) {
      throw Error(where + ": client " + std::to_string(id) + " a second time");
    }
  }
  return roster;
}

namespace {

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;

// The PEM (or text) `write` puts into a memory BIO.
std::string Pem(const std::function<int(BIO*)>& write, const std::string& what) {
  Bio bio(BIO_new(BIO_s_mem()), &BIO_free);
  if (!bio || write(bio.get()) != 1) throw Error("keygen: could not encode " + what);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string PrivateKeyPem(EVP_PKEY* key, const std::string& what) {
  return Pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); },
             what);
}

Error KeyExists(const std::string& path) {
  return Error(path + ": exists already; keys are never replaced (move it away first)");
}

Pkey NewKey(const char* algorithm, const char* curve) {
  EVP_PKEY* key = curve == nullptr ? EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm)
                                   : EVP_PKEY_Q_keygen(nullptr, nullptr, algorithm, curve);
  if (key == nullptr) throw Error(std::string("keygen: could not generate an ") + algorithm + " key");
  return Pkey(key, &EVP_PKEY_free);
}

}  // namespace

std::vector<std::string> GenerateClientKeys(const std::string& dir, int id) {
  if (id < 0) throw Error("keygen: a client id >= 0 is required");
  MakeDirs(dir);
  const std::string stem = dir + "/client-" + std::to_string(id);
  const Pkey tls = NewKey("EC", "P-256");
  const Pkey secagg = NewKey("ED25519", nullptr);
  // The certificate request: the subject the server reads the id from.
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> request(X509_REQ_new(), &X509_REQ_free);
  const std::string cn = "client-" + std::to_string(id);
  X509_NAME* subject = request ? X509_REQ_get_subject_name(request.get()) : nullptr;
  if (subject == nullptr || X509_REQ_set_version(request.get(), 0) != 1 ||
      X509_NAME_add_entry_by_NID(subject, NID_commonName, MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) != 1 ||
      X509_REQ_set_pubkey(request.get(), tls.get()) != 1 ||
      X509_REQ_sign(request.get(), tls.get(), EVP_sha256()) <= 0) {
    throw Error("keygen: could not make the certificate request");
  }
  unsigned char* der = nullptr;
  const int der_size = i2d_PUBKEY(secagg.get(), &der);
  if (der_size <= 0) throw Error("keygen: could not encode the secure aggregation key");
  std::string base64(4 * ((static_cast<size_t>(der_size) + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(base64.data()), der, der_size);
  OPENSSL_free(der);
  base64.resize(static_cast<size_t>(written));
  const std::vector<std::pair<std::string, std::string>> files = {
      {stem + ".key", PrivateKeyPem(tls.get(), "the TLS key")},
      {stem + ".secagg.key", PrivateKeyPem(secagg.get(), "the secure aggregation key")},
      {stem + ".dp.key", NewNoiseKeyText()},
      {stem + ".csr", Pem([&](BIO* b) { return PEM_write_bio_X509_REQ(b, request.get()); }, "the request")},
      {stem + ".secagg.pub", std::to_string(id) + " " + base64 + "\n"}};
  // Nothing is written if any file exists: no half set of keys.
  for (const auto& file : files) {
    if (FileExists(file.first)) throw KeyExists(file.first);
  }
  std::vector<std::string> paths;
  for (const auto& [path, contents] : files) {
    const bool secret = path.size() > 4 && path.compare(path.size() - 4, 4, ".key") == 0;
    WriteNewFile(path, contents, secret ? 0600 : 0644);
    paths.push_back(path);
  }
  return paths;
}

// Debian's Abseil is built without NDEBUG, so every absl::Mutex that gRPC
// locks would also update Abseil's process-wide lock-order graph (a debug
// check, off in gRPC's own release builds) under one global lock: without it
// a server with 5,000 idle clients went from 20.6% to 15.2% of a core.
void PrepareGrpcRuntime() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

std::string RoleIdentity(const std::string& role) { return role + ".fedprof.invalid"; }

void ExpectPeer(const std::string& tls_dir, const std::string& role, grpc::ChannelArguments* args) {
  if (!tls_dir.empty()) args->SetSslTargetNameOverride(RoleIdentity(role));
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const std::string& tls_dir,
                                                           const std::string& name) {
  PrepareGrpcRuntime();
  if (tls_dir.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = ReadPem(tls_dir, "ca.crt");
  const std::string cert = ReadPem(tls_dir, name + ".crt");
  // Peers check the role's name: a certificate without it serves no one.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size())),
                                                BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> x509(
      bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
  const std::string identity = RoleIdentity(name);
  if (!x509 || X509_check_host(x509.get(), identity.data(), identity.size(), 0, nullptr) != 1) {
    throw Error(tls_dir + "/" + name + ".crt does not name " + identity +
                ", which its peers check: issue it again with scripts/make-certs.sh");
  }
  options.pem_key_cert_pairs.push_back({ReadPem(tls_dir, name + ".key"), cert});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir, int id) {
  return ClientCredentials(tls_dir, "client-" + std::to_string(id));
}

std::shared_ptr<grpc::ChannelCredentials> ClientCredentials(const std::string& tls_dir,
                                                            const std::string& name) {
  PrepareGrpcRuntime();
  if (tls_dir.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadPem(tls_dir, "ca.crt");
  options.pem_private_key = ReadPem(tls_dir, name + ".key");
  options.pem_cert_chain = ReadPem(tls_dir, name + ".crt");
  return grpc::SslCredentials(options);
}

namespace {

using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;

Certificate ParsePem(const char* data, size_t size) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(data, static_cast<int>(size)), BIO_free);
  return Certificate(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
}

// Who `cert` names, strictly (CertifiedClient), and its fingerprint.
CertifiedPeer PeerOf(X509* cert) {
  CertifiedPeer peer;
  unsigned char* der = nullptr;
  const int length = i2d_X509(cert, &der);
  if (length > 0) {
    peer.sha256 = ToHex(Sha256(std::string(reinterpret_cast<const char*>(der), static_cast<size_t>(length))));
    OPENSSL_free(der);
  }
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int first = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (first < 0) {
    peer.problem = "a certificate without a common name";
    return peer;
  }
  if (X509_NAME_get_index_by_NID(subject, NID_commonName, first) >= 0) {
    peer.problem = "a certificate with more than one common name";
    return peer;
  }
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, first));
  const std::string cn(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                       static_cast<size_t>(ASN1_STRING_length(data)));
  // The number after `prefix`, or -1.
  const auto numbered = [&cn](const std::string& prefix) {
    return cn.compare(0, prefix.size(), prefix) == 0 ? ParseClientId(cn.substr(prefix.size()), 1000000000)
                                                     : -1;
  };
  peer.id = numbered("client-");
  peer.relay = numbered("relay-");
  const std::string role = "operator-";
  if (cn.compare(0, role.size(), role) == 0 && IsOperatorName(cn.substr(role.size()))) {
    peer.operator_name = cn.substr(role.size());
  }
  if (!peer.operator_name.empty()) {
    peer.problem = "an operator's certificate (operator-" + peer.operator_name + ")";
  } else if (peer.id < 0 && peer.relay < 0) {
    peer.problem = "certificate CN '" + Printable(cn, 64) + "' is not client-<id> (canonical decimal)";
  } else if (peer.id < 0) {
    peer.problem = "a relay's certificate (relay-" + std::to_string(peer.relay) + ")";
  }
  return peer;
}

}  // namespace

bool IsOperatorName(const std::string& name) {
  return !name.empty() && name.size() <= 32 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-_") == std::string::npos;
}

bool IsLoopbackAddress(const std::string& host_port) {
  const std::string host = host_port.substr(0, host_port.rfind(':'));
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

CertifiedPeer CertifiedClient(const grpc::ServerContextBase& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  CertifiedPeer none;
  if (!auth || !auth->IsPeerAuthenticated()) {
    none.problem = "no verified client certificate";
    return none;
  }
  // gRPC names only the first CN (x509_common_name): read the certificate.
  const std::vector<grpc::string_ref> pems = auth->FindPropertyValues("x509_pem_cert");
  if (pems.size() != 1) {
    none.problem = "no client certificate";
    return none;
  }
  const Certificate cert = ParsePem(pems[0].data(), pems[0].size());
  if (!cert) {
    none.problem = "an unreadable client certificate";
    return none;
  }
  return PeerOf(cert.get());
}

CertificateFacts ReadCertificate(const std::string& pem, const std::string& ca_pem) {
  CertificateFacts facts;
  const Certificate cert = ParsePem(pem.data(), pem.size());
  if (!cert) {
    facts.problem = "not a PEM certificate";
    return facts;
  }
  facts.peer = PeerOf(cert.get());
  if (const ASN1_TIME* end = X509_get0_notAfter(cert.get())) {
    std::tm t{};
    if (ASN1_TIME_to_tm(end, &t) == 1) {
      char text[32];
      std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &t);
      facts.not_after = text;
    }
  }
  const Certificate ca = ParsePem(ca_pem.data(), ca_pem.size());
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> context(X509_STORE_CTX_new(),
                                                                          X509_STORE_CTX_free);
  if (!ca || !store || !context || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(context.get(), store.get(), cert.get(), nullptr) != 1) {
    facts.problem = "the CA's certificate (ca.crt) cannot be read";
    return facts;
  }
  if (X509_verify_cert(context.get()) != 1) {
    facts.problem = std::string("not a certificate of this federation's CA (") +
                    X509_verify_cert_error_string(X509_STORE_CTX_get_error(context.get())) + ")";
  }
  return facts;
}

}  // namespace fedprof
