#include "fedprof/monitor/http.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/version.hpp>

#include <openssl/crypto.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/monitor/dashboard.h"

namespace fedprof {
// The parts behind MonitorHttpServer and MonitorGet (named, not anonymous:
// MonitorHttpServer::Impl holds a Server).
namespace monitor_http {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

// Where Debian's libjs-chart.js installs Chart.js (UMD build).
constexpr const char* kChartJsPath = "/usr/share/javascript/chart.js/chart.min.js";

// A request is a GET of a short path: its line and headers together may
// not exceed kRequestBytes, it may carry no body, and it must arrive whole
// within kRequestTime of the connection's first byte (or of the previous
// answer on a kept-alive connection), however it trickles in. Past any of
// these the connection is closed, so no peer holds memory or time for
// long. All connections share one thread that never blocks on a peer.
constexpr size_t kRequestBytes = 8192;
constexpr std::chrono::seconds kRequestTime{3};
constexpr std::chrono::seconds kWriteTime{5};  // to send one answer
constexpr int kMaxConnections = 256;           // open at once, all peers
constexpr int kMaxConnectionsPerPeer = 32;     // open at once, one address

using Request = http::request<http::empty_body>;
using Response = http::response<http::string_body>;

// What a route answers, built on the server's thread.
struct Route {
  bool guarded;  // needs the token
  const char* type;
  std::function<std::string()> body;
};

// The open connections, counted by peer address.
class ConnectionCount {
 public:
  bool Admit(const std::string& peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    int& mine = by_peer_[peer];
    if (total_ >= kMaxConnections || mine >= kMaxConnectionsPerPeer) {
      if (mine == 0) by_peer_.erase(peer);
      return false;
    }
    ++mine;
    ++total_;
    return true;
  }
  void Release(const std::string& peer) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--by_peer_[peer] == 0) by_peer_.erase(peer);
    --total_;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, int> by_peer_;
  int total_ = 0;
};

struct Shared {
  std::map<std::string, Route> routes;  // by path
  std::function<bool(const std::string&)> authorized;
  ConnectionCount connections;
};

void SetSecurityHeaders(Response& res) {
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Content-Security-Policy",
          "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
          "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'");
}

Response Answer(http::status status, const std::string& type, std::string body) {
  Response res{status, 11};
  res.set(http::field::server, "fedprof-monitor");
  res.set(http::field::content_type, type);
  SetSecurityHeaders(res);
  res.body() = std::move(body);
  return res;
}

Response Handle(const Shared& shared, const Request& req) {
  if (req.method() != http::verb::get) {
    Response res = Answer(http::status::method_not_allowed, "text/plain", "GET only\n");
    res.set(http::field::allow, "GET");
    return res;
  }
  const std::string target(req.target());
  const auto route = shared.routes.find(target.substr(0, target.find('?')));
  if (route == shared.routes.end()) return Answer(http::status::not_found, "text/plain", "not found\n");
  const auto authorization = req.find(http::field::authorization);
  if (route->second.guarded &&
      !shared.authorized(authorization == req.end() ? "" : std::string(authorization->value()))) {
    Response res = Answer(http::status::unauthorized, "text/plain", "unauthorized\n");
    res.set(http::field::www_authenticate, "Bearer");
    return res;
  }
  // What a route reads may fail (a federation's database, say): the peer
  // hears so; the server goes on.
  try {
    return Answer(http::status::ok, route->second.type, route->second.body());
  } catch (const std::exception&) {
    return Answer(http::status::internal_server_error, "text/plain", "the monitor could not read it\n");
  }
}

// What a request that broke the limits is told before its connection closes
// (nothing when it stalled: it is not reading either).
std::optional<Response> Refusal(beast::error_code ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return Answer(http::status::request_header_fields_too_large, "text/plain",
                  "request over " + std::to_string(kRequestBytes) + " bytes\n");
  }
  if (ec == http::error::unexpected_body) {
    return Answer(http::status::payload_too_large, "text/plain", "a request carries no body\n");
  }
  if (ec == beast::error::timeout || ec == net::error::eof || ec == http::error::end_of_stream ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset) {
    return std::nullopt;
  }
  return Answer(http::status::bad_request, "text/plain", "malformed request\n");
}

// One connection: read a request (bounded as above), answer, repeat while
// the peer keeps the connection alive. Stream is beast::tcp_stream or
// beast::ssl_stream<beast::tcp_stream>.
template <class Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(Stream stream, std::shared_ptr<Shared> shared, std::string peer)
      : stream_(std::move(stream)), shared_(std::move(shared)), peer_(std::move(peer)) {}
  ~Connection() { shared_->connections.Release(peer_); }

  void Start() {
    Socket().expires_after(kRequestTime);
    if constexpr (kTls) {
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (!ec) self->Read();
                              });
    } else {
      Read();
    }
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  beast::tcp_stream& Socket() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    parser_->header_limit(kRequestBytes);
    Socket().expires_after(kRequestTime);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->Answered(ec);
                     });
  }

  void Answered(beast::error_code ec) {
    std::optional<Response> res;
    bool keep_alive = false;
    if (ec) {
      res = Refusal(ec);
      if (!res) return Drop();
    } else {
      const Request& req = parser_->get();
      res = Handle(*shared_, req);
      keep_alive = req.keep_alive();
    }
    res->keep_alive(keep_alive);
    res->prepare_payload();
    response_ = std::move(*res);
    Socket().expires_after(kWriteTime);
    http::async_write(stream_, response_,
                      [self = this->shared_from_this(), keep_alive](beast::error_code sent, size_t) {
                        if (!sent && keep_alive) return self->Read();
                        self->Close();
                      });
  }

  // Ends the connection after an answer (TLS: with its close_notify, within
  // kWriteTime).
  void Close() {
    if constexpr (kTls) {
      Socket().expires_after(kWriteTime);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        beast::error_code ignored;
        self->Socket().socket().close(ignored);
      });
    } else {
      beast::error_code ignored;
      Socket().socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

  // Ends a connection whose peer stalled or went: nothing more is sent.
  void Drop() {
    beast::error_code ignored;
    Socket().socket().close(ignored);
  }

  Stream stream_;
  std::shared_ptr<Shared> shared_;
  const std::string peer_;
  beast::flat_buffer buffer_{kRequestBytes};
  std::optional<http::request_parser<http::empty_body>> parser_;
  Response response_;
};

// The server: its acceptor and connections on one io_context, run by one
// thread.
class Server {
 public:
  Server(const std::string& host, int port, const std::string& tls_dir, const HttpHandlers& handlers) {
    if (!tls_dir.empty()) LoadCertificate(tls_dir);
    shared_->authorized = handlers.authorized;
    std::map<std::string, Route>& routes = shared_->routes;
    routes["/metrics"] = {true, "text/plain; version=0.0.4; charset=utf-8", handlers.metrics};
    routes["/status"] = {true, "application/json", handlers.status};
    routes["/dashboard.json"] = {true, "application/json", handlers.dashboard_data};
    // Liveness, the page and its chart library hold nothing of the run.
    routes["/healthz"] = {false, "text/plain", [] { return std::string("ok\n"); }};
    routes["/"] = {false, "text/html; charset=utf-8",
                   handlers.page ? handlers.page : std::function<std::string()>([] { return DashboardHtml(); })};
    if (FileExists(kChartJsPath)) {
      auto chart_js = std::make_shared<const std::string>(ReadFile(kChartJsPath));
      routes["/chart.js"] = {false, "application/javascript", [chart_js] { return *chart_js; }};
    }

    beast::error_code ec;
    const net::ip::address address = net::ip::make_address(host, ec);
    if (!ec) {
      const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
      acceptor_.open(endpoint.protocol(), ec);
      if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
      if (!ec) acceptor_.bind(endpoint, ec);
      if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) throw Error("--monitor: cannot listen on " + host + ":" + std::to_string(port));
    url_ = std::string(tls_dir.empty() ? "http" : "https") + "://" +
           (address.is_v6() ? "[" + host + "]" : host) + ":" +
           std::to_string(acceptor_.local_endpoint().port()) + "/";
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  // Stops at once: an open connection is dropped, whatever it was doing.
  ~Server() {
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

  const std::string& url() const { return url_; }

 private:
  void LoadCertificate(const std::string& tls_dir) {
    const std::string cert = tls_dir + "/server.crt", key = tls_dir + "/server.key";
    for (const std::string& f : {cert, key}) {
      if (!FileExists(f)) throw Error("--monitor: TLS file " + f + " not found");
    }
    tls_.emplace(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    tls_->use_certificate_chain_file(cert, ec);
    if (!ec) tls_->use_private_key_file(key, ssl::context::pem, ec);
    if (ec) throw Error("--monitor: cannot load " + cert + " and " + key + ": " + ec.message());
  }

  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) Open(std::move(socket));
      Accept();
    });
  }

  void Open(tcp::socket socket) {
    beast::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? "" : remote.address().to_string();
    if (ec || !shared_->connections.Admit(peer)) return;  // closed as `socket` goes
    beast::tcp_stream stream(std::move(socket));
    if (tls_) {
      using TlsStream = beast::ssl_stream<beast::tcp_stream>;
      std::make_shared<Connection<TlsStream>>(TlsStream(std::move(stream), *tls_), shared_, peer)->Start();
    } else {
      std::make_shared<Connection<beast::tcp_stream>>(std::move(stream), shared_, peer)->Start();
    }
  }

  std::optional<ssl::context> tls_;  // outlives the connections that use it
  net::io_context ioc_{1};
  tcp::acceptor acceptor_{ioc_};
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::thread thread_;
  std::string url_;
};

// Runs an io_context on its own thread while a caller waits on futures.
class IoThread {
 public:
  IoThread() : work_(net::make_work_guard(ioc)), thread_([this] { ioc.run(); }) {}
  ~IoThread() {
    work_.reset();
    ioc.stop();
    thread_.join();
  }
  net::io_context ioc;

 private:
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::thread thread_;
};

// One GET over `stream` (connected; TLS handshaken), within the stream's
// deadline.
template <class Stream>
Response Get(Stream& stream, const Request& req) {
  http::async_write(stream, req, net::use_future).get();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::async_read(stream, buffer, parser, net::use_future).get();
  return parser.release();
}

// MonitorGet's answer, whatever its status; throws boost::system::system_error
// when the monitor cannot be reached within `timeout`.
Response Fetch(const std::string& host, const std::string& port, const Request& req,
               const std::string& ca_file, std::chrono::milliseconds timeout) {
  IoThread io;
  tcp::resolver resolver(io.ioc);
  const auto endpoints = resolver.async_resolve(host, port, net::use_future).get();
  if (ca_file.empty()) {
    beast::tcp_stream stream(io.ioc);
    stream.expires_after(timeout);
    stream.async_connect(endpoints, net::use_future).get();
    return Get(stream, req);
  }
  ssl::context context(ssl::context::tls_client);
  context.load_verify_file(ca_file);
  beast::ssl_stream<beast::tcp_stream> stream(io.ioc, context);
  stream.set_verify_mode(ssl::verify_peer);
  stream.set_verify_callback(ssl::host_name_verification(host));
  beast::error_code not_ip;
  net::ip::make_address(host, not_ip);
  if (not_ip) SSL_set_tlsext_host_name(stream.native_handle(), host.c_str());  // SNI names hosts only
  beast::get_lowest_layer(stream).expires_after(timeout);
  beast::get_lowest_layer(stream).async_connect(endpoints, net::use_future).get();
  stream.async_handshake(ssl::stream_base::client, net::use_future).get();
  return Get(stream, req);
}

}  // namespace monitor_http

struct MonitorHttpServer::Impl {
  Impl(const std::string& host, int port, const std::string& tls_dir, const HttpHandlers& handlers)
      : server(host, port, tls_dir, handlers) {}
  monitor_http::Server server;
};

MonitorHttpServer::MonitorHttpServer(const std::string& host, int port, const std::string& tls_dir,
                                     HttpHandlers handlers)
    : impl_(std::make_unique<Impl>(host, port, tls_dir, handlers)) {}

MonitorHttpServer::~MonitorHttpServer() = default;

std::string MonitorHttpServer::url() const { return impl_->server.url(); }

std::string ReadBearerToken(const std::string& file, const std::string& flag) {
  if (!FileExists(file)) throw Error(flag + " " + file + ": no such file");
  std::string token = ReadFile(file);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 16 || token.find_first_of(" \t\r\n") != std::string::npos) {
    throw Error(flag + " " + file + ": expected one line of at least 16 characters without spaces");
  }
  return token;
}

bool BearerMatches(const std::string& token, const std::string& authorization) {
  if (token.empty()) return true;
  const std::string expected = "Bearer " + token;
  return authorization.size() == expected.size() &&
         CRYPTO_memcmp(authorization.data(), expected.data(), expected.size()) == 0;
}

std::string MonitorGet(const std::string& address, const std::string& path,
                       const std::string& token, const std::string& ca_file, double timeout_s) {
  namespace http = boost::beast::http;
  const bool https = !ca_file.empty();
  const std::string base = (https ? "https://" : "http://") + address;
  const size_t colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty() || port.empty() || port.find_first_not_of("0123456789") != std::string::npos) {
    throw Error("status: '" + address + "' is not HOST:PORT");
  }
  if (https && !FileExists(ca_file)) throw Error("status: --ca-file " + ca_file + ": no such file");
  monitor_http::Request req{http::verb::get, path, 11};
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "fedprof-status");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  monitor_http::Response res;
  try {
    res = monitor_http::Fetch(host, port, req, ca_file,
                              std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  } catch (const boost::system::system_error& e) {
    throw Error("status: cannot reach " + base + path + ": " + Printable(e.code().message(), 200));
  }
  const int status = static_cast<int>(res.result_int());
  if (status != 200) {
    throw Error("status: " + base + path + " answered " + std::to_string(status) +
                (status == 401 ? " (give --token-file)" : ""));
  }
  return std::move(res.body());
}

}  // namespace fedprof
