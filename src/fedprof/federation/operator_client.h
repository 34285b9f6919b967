#ifndef FEDPROF_FEDERATION_OPERATOR_CLIENT_H_
#define FEDPROF_FEDERATION_OPERATOR_CLIENT_H_

// An operator's calls to a federation (fedprof federation submit, runs,
// status, logs, stop, fetch, nodes, enrol, revoke, audit), over mutual TLS
// with the operator's certificate operator-<name> from its --tls-dir. Each
// throws fedprof::Error with the federation's one-line answer when it
// refuses, or with why it could not be reached.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "operator.pb.h"

namespace fedprof::federation {

namespace pb = federation::v1;

struct OperatorIdentity {
  std::string server;   // the federation's HOST:PORT
  std::string tls_dir;  // ca.crt, operator-<name>.crt, operator-<name>.key
  std::string name;     // "" = the one operator-*.crt of tls_dir
  bool insecure = false;
};

class OperatorClient {
 public:
  explicit OperatorClient(const OperatorIdentity& identity);
  ~OperatorClient();

  // `config`: the run's whole config as TOML; `model`: the bytes of the
  // module its model.file names ("" when none).
  pb::RunInfo Submit(const std::string& config, const std::string& name, const std::string& model);
  std::vector<pb::RunInfo> Runs();
  pb::RunInfo Show(int64_t run);
  // Each line of the run's log from line `from`, as it comes; with
  // `follow`, until the run ends.
  void Log(int64_t run, int64_t from, bool follow, const std::function<void(const std::string&)>& line);
  pb::RunInfo Stop(int64_t run);
  // Writes the run's outputs into `dir` (made if missing); their names.
  std::vector<std::string> Fetch(int64_t run, const std::string& dir);
  std::vector<pb::NodeInfo> Nodes();
  pb::NodeInfo Enrol(const std::string& certificate_pem);
  pb::NodeInfo Revoke(int node, const std::string& reason);
  std::vector<pb::AuditEntry> Audit(int64_t after);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The operator name of the one operator-<name>.crt in `tls_dir`; throws
// fedprof::Error when there is none or more than one (give --operator).
std::string OnlyOperator(const std::string& tls_dir);

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_OPERATOR_CLIENT_H_
