#ifndef FEDPROF_MONITOR_HTTP_H_
#define FEDPROF_MONITOR_HTTP_H_

// The monitor's HTTP(S) side, on Boost.Beast: a fixed set of read-only
// routes, small bounded requests, deadlines, one thread of its own that
// never blocks on a peer (http.cc says how each is bounded).

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace fedprof {

struct HttpHandlers {
  // Whether a request's Authorization header value may read the run's data.
  std::function<bool(const std::string& authorization)> authorized;
  std::function<std::string()> metrics;         // /metrics
  std::function<std::string()> status;          // /status
  std::function<std::string()> dashboard_data;  // /dashboard.json
  std::function<std::string()> page;            // /: the run's dashboard when empty
};

// The bearer token in `file`: one line of at least 16 characters without
// spaces, or fedprof::Error naming `flag` and the file.
std::string ReadBearerToken(const std::string& file, const std::string& flag);
// Whether `authorization` (a request's header) is "Bearer <token>",
// compared in constant time; any request is when `token` is empty.
bool BearerMatches(const std::string& token, const std::string& authorization);

class MonitorHttpServer {
 public:
  // Binds `host`:`port` (0: a free port), HTTPS with `tls_dir`'s server.crt
  // and server.key when `tls_dir` is not empty, and serves on a thread of
  // its own. Throws fedprof::Error when it cannot.
  MonitorHttpServer(const std::string& host, int port, const std::string& tls_dir,
                    HttpHandlers handlers);
  ~MonitorHttpServer();

  std::string url() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// GET `path` from a monitor at HOST:PORT (`fedprof status`): HTTPS with
// the server's certificate checked against `ca_file` when that is not
// empty, with `token` as bearer token when not empty. Returns the body;
// throws fedprof::Error on any failure or a status other than 200.
std::string MonitorGet(const std::string& address, const std::string& path,
                       const std::string& token, const std::string& ca_file, double timeout_s);

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_HTTP_H_
