#include "fedprof/monitor/http.h"

// CPPHTTPLIB_OPENSSL_SUPPORT and the other feature defines come from the
// library's pkg-config file (CMakeLists.txt).
#include <httplib.h>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/monitor/dashboard.h"

namespace fedprof {
namespace {

// Where Debian's libjs-chart.js installs Chart.js (UMD build).
constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

void SetSecurityHeaders(httplib::Response& res) {
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'");
}

}  // namespace

struct MonitorHttpServer::Impl {
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::string url;
  std::string chart_js;  // empty when libjs-chart.js is not installed
};

MonitorHttpServer::MonitorHttpServer(const std::string& host, int port, const std::string& tls_dir,
                                     HttpHandlers handlers)
    : impl_(std::make_unique<Impl>()) {
  if (tls_dir.empty()) {
    impl_->server = std::make_unique<httplib::Server>();
  } else {
    const std::string cert = tls_dir + "/server.crt", key = tls_dir + "/server.key";
    for (const std::string& f : {cert, key}) {
      if (!FileExists(f)) throw Error("--monitor: TLS file " + f + " not found");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(cert.c_str(), key.c_str());
    if (!ssl->is_valid()) throw Error("--monitor: cannot load " + cert + " and " + key);
    impl_->server = std::move(ssl);
  }
  if (FileExists(kChartJsPath)) impl_->chart_js = ReadFile(kChartJsPath);
  httplib::Server& s = *impl_->server;
  // A request is a GET of a short path: anything bigger is refused before it
  // is read whole, and a peer that stalls is dropped within seconds.
  s.set_payload_max_length(1024);
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_idle_interval(0, 0);
  s.set_keep_alive_max_count(100);
  s.set_keep_alive_timeout(5);
  auto guarded = [handlers](std::function<std::string()> body, const char* type) {
    return [handlers, body, type](const httplib::Request& req, httplib::Response& res) {
      SetSecurityHeaders(res);
      if (!handlers.authorized(req.get_header_value("Authorization"))) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        res.set_content("unauthorized\n", "text/plain");
        return;
      }
      res.set_content(body(), type);
    };
  };
  s.Get("/metrics", guarded(handlers.metrics, "text/plain; version=0.0.4; charset=utf-8"));
  s.Get("/status", guarded(handlers.status, "application/json"));
  s.Get("/dashboard.json", guarded(handlers.dashboard_data, "application/json"));
  // Liveness, the page and its chart library hold nothing of the run.
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    SetSecurityHeaders(res);
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    SetSecurityHeaders(res);
    res.set_content(DashboardHtml(), "text/html; charset=utf-8");
  });
  const std::string* chart_js = &impl_->chart_js;
  s.Get("/chart.js", [chart_js](const httplib::Request&, httplib::Response& res) {
    SetSecurityHeaders(res);
    if (chart_js->empty()) {
      res.status = 404;
      res.set_content("chart.js not installed (Debian package libjs-chart.js)\n", "text/plain");
      return;
    }
    res.set_content(*chart_js, "application/javascript");
  });
  int bound = port;
  if (port == 0) {
    bound = s.bind_to_any_port(host);
  } else if (!s.bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    throw Error("--monitor: cannot listen on " + host + ":" + std::to_string(port));
  }
  const bool v6 = host.find(':') != std::string::npos;
  impl_->url = std::string(tls_dir.empty() ? "http" : "https") + "://" +
               (v6 ? "[" + host + "]" : host) + ":" + std::to_string(bound) + "/";
  impl_->thread = std::thread([&s] { s.listen_after_bind(); });
}

MonitorHttpServer::~MonitorHttpServer() {
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string MonitorHttpServer::url() const { return impl_->url; }

std::string MonitorGet(const std::string& address, const std::string& path,
                       const std::string& token, const std::string& ca_file, double timeout_s) {
  const bool https = !ca_file.empty();
  const std::string base = (https ? "https://" : "http://") + address;
  httplib::Client client(base);
  if (!client.is_valid()) throw Error("status: '" + address + "' is not HOST:PORT");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  if (https) {
    if (!FileExists(ca_file)) throw Error("status: --ca-file " + ca_file + ": no such file");
    client.set_ca_cert_path(ca_file.c_str());
    client.enable_server_certificate_verification(true);
  }
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  httplib::Result res = client.Get(path.c_str(), headers);
  if (!res) {
    throw Error("status: cannot reach " + base + path + ": " + httplib::to_string(res.error()));
  }
  if (res->status != 200) {
    throw Error("status: " + base + path + " answered " + std::to_string(res->status) +
                (res->status == 401 ? " (give --token-file)" : ""));
  }
  return res->body;
}

}  // namespace fedprof
