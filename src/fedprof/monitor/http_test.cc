// The monitor's HTTP side against peers that do not play fair: a request
// with megabytes of headers, peers that trickle a header line at a time and
// hold their connections, a TLS peer that never says hello. Each talks to a
// real server over loopback through plain sockets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/monitor/http.h"
#include "tests/expect_error.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

HttpHandlers Handlers() {
  HttpHandlers h;
  h.authorized = [](const std::string& a) { return a == "Bearer secret"; };
  h.metrics = [] { return std::string("fedprof_up 1\n"); };
  h.status = [] { return std::string("{}"); };
  h.dashboard_data = [] { return std::string("{}"); };
  return h;
}

// "HOST:PORT" of a server's url.
std::string Address(const MonitorHttpServer& server) {
  std::string url = server.url();
  url = url.substr(url.find("://") + 3);
  return url.substr(0, url.size() - 1);
}

int Port(const MonitorHttpServer& server) {
  const std::string a = Address(server);
  return std::atoi(a.substr(a.rfind(':') + 1).c_str());
}

// A raw TCP connection to 127.0.0.1:port; closed when it goes.
class Peer {
 public:
  explicit Peer(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Peer() { ::close(fd_); }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  bool connected() const { return connected_; }
  // Whether all of `bytes` went out (false once the server closed).
  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // Whether something (or the end) can be read within `timeout_s`.
  bool Readable(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout_s * 1000)) > 0;
  }
  // What the server sent until it closed or `timeout_s` passed.
  std::string ReadAll(double timeout_s) {
    std::string out;
    const Clock::time_point start = Clock::now();
    char buf[4096];
    while (SecondsSince(start) < timeout_s && Readable(timeout_s - SecondsSince(start))) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Whether the server closed the connection (reads the end or a reset)
  // within `timeout_s`; data before the end is skipped.
  bool ClosedWithin(double timeout_s) {
    const Clock::time_point start = Clock::now();
    char buf[4096];
    while (SecondsSince(start) < timeout_s) {
      if (!Readable(timeout_s - SecondsSince(start))) return false;
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string Header(int i) { return "X-Pad-" + std::to_string(i) + ": " + std::string(1000, 'a') + "\r\n"; }

TEST(MonitorHttpTest, MegabytesOfHeadersAreRefusedAfterTheLimitNotAfterTheirEnd) {
  MonitorHttpServer server("127.0.0.1", 0, "", Handlers());
  Peer peer(Port(server));
  ASSERT_TRUE(peer.connected());
  ASSERT_TRUE(peer.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
  // 4.6 MiB of headers cannot all go: the server answers and closes once
  // it has read 8 KiB of them.
  bool all_sent = true;
  for (int i = 0; i < 4700 && all_sent; ++i) all_sent = peer.Send(Header(i));
  EXPECT_FALSE(all_sent);
  const std::string answer = peer.ReadAll(5);
  EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);

  // Many short headers count the same; a body is refused too.
  Peer many(Port(server));
  std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 2000; ++i) request += "A: b\r\n";
  many.Send(request + "\r\n");
  EXPECT_EQ(many.ReadAll(5).rfind("HTTP/1.1 431", 0), 0u);
  Peer body(Port(server));
  body.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(body.ReadAll(5).rfind("HTTP/1.1 413", 0), 0u);

  // And the server still answers.
  EXPECT_EQ(MonitorGet(Address(server), "/healthz", "", "", 5), "ok\n");
}

// Twenty peers each send a header line every half second. The server keeps
// answering others at once, cuts each trickler off within its request time
// (3 s), and its destructor returns without waiting for any of them.
TEST(MonitorHttpTest, TricklingPeersHoldNoOneUpAndAreCutOff) {
  auto server = std::make_unique<MonitorHttpServer>("127.0.0.1", 0, "", Handlers());
  const int port = Port(*server);
  std::vector<std::unique_ptr<Peer>> peers;
  for (int i = 0; i < 20; ++i) {
    peers.push_back(std::make_unique<Peer>(port));
    ASSERT_TRUE(peers.back()->connected());
    ASSERT_TRUE(peers.back()->Send("GET /metrics HTTP/1.1\r\n"));
  }
  const Clock::time_point start = Clock::now();
  std::vector<bool> cut(peers.size(), false);
  double slowest_answer_s = 0;
  for (int tick = 0; tick < 12; ++tick) {
    for (size_t i = 0; i < peers.size(); ++i) {
      if (!cut[i] && !peers[i]->Send("X-Tick-" + std::to_string(tick) + ": 1\r\n")) cut[i] = true;
    }
    const Clock::time_point asked = Clock::now();
    EXPECT_EQ(MonitorGet(Address(*server), "/metrics", "secret", "", 2), "fedprof_up 1\n");
    slowest_answer_s = std::max(slowest_answer_s, SecondsSince(asked));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_LT(slowest_answer_s, 1.5);
  for (size_t i = 0; i < peers.size(); ++i) {
    EXPECT_TRUE(cut[i] || peers[i]->ClosedWithin(0.1)) << "peer " << i << " still connected after "
                                                       << SecondsSince(start) << " s";
  }

  // New tricklers, then the server goes: at once.
  std::vector<std::unique_ptr<Peer>> more;
  for (int i = 0; i < 20; ++i) {
    more.push_back(std::make_unique<Peer>(port));
    more.back()->Send("GET / HTTP/1.1\r\n");
  }
  const Clock::time_point stop = Clock::now();
  server.reset();
  EXPECT_LT(SecondsSince(stop), 0.5);
  for (auto& p : more) EXPECT_TRUE(p->ClosedWithin(1));
}

TEST(MonitorHttpTest, OverTlsASilentPeerIsDroppedAndTheCertificateIsChecked) {
  const std::string dir = testing_support::FreshDir("monitor_http", "tls");
  ASSERT_EQ(std::system(("bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh " + dir +
                         "/a 1 > /dev/null 2>&1 && "
                         "bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh " +
                         dir + "/b 1 > /dev/null 2>&1")
                            .c_str()),
            0);
  MonitorHttpServer server("127.0.0.1", 0, dir + "/a", Handlers());
  EXPECT_EQ(server.url().rfind("https://127.0.0.1:", 0), 0u);
  EXPECT_EQ(MonitorGet(Address(server), "/healthz", "", dir + "/a/ca.crt", 5), "ok\n");
  testing_support::ExpectError([&] { MonitorGet(Address(server), "/healthz", "", dir + "/b/ca.crt", 5); },
                               "cannot reach");
  Peer silent(Port(server));
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(silent.ClosedWithin(6));
  EXPECT_LT(SecondsSince(start), 4.5);
}

}  // namespace
}  // namespace fedprof
