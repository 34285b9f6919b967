// The monitor as an operator sees it: /metrics scraped during real runs and
// read by the Prometheus client library's parser, the dashboard rendered by
// a headless Chromium, `fedprof status`, and what the monitor refuses.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/monitor/exposition.h"
#include "fedprof/monitor/http.h"
#include "fedprof/monitor/monitor.h"
#include "tests/expect_error.h"
#include "tests/monitor_readers.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::Capture;
using testing_support::FreshDir;
using testing_support::kElements;
using testing_support::kRenderedPage;
using testing_support::Sample;
using testing_support::Scrape;
using testing_support::ExpectError;
using testing_support::kCli;
using testing_support::Processes;
using testing_support::SmallRun;
using testing_support::kTimeScale;
using testing_support::WaitUntil;

// Scrapes the monitor at `address` until `done` holds of its samples (at
// most `timeout_s`); the last scrape goes to *samples.
bool ScrapeUntil(const std::string& address, double timeout_s, nlohmann::json* samples,
                 const std::function<bool(const nlohmann::json&)>& done) {
  return WaitUntil(
      [&] {
        *samples = Scrape("http://" + address);
        return done(*samples);
      },
      timeout_s);
}

// The /status of the monitor at "HOST:PORT", or null while it cannot be read.
nlohmann::json Status(const std::string& address) {
  try {
    return nlohmann::json::parse(MonitorGet(address, "/status", "", "", 5));
  } catch (const std::exception&) {
    return nlohmann::json();
  }
}

int64_t Round(const std::string& address) {
  const nlohmann::json s = Status(address);
  return s.is_object() ? s.value("round", int64_t{0}) : 0;
}

// Starts `fedprof <command> --monitor 127.0.0.1:0` and waits for its monitor's address.
std::string StartMonitored(Processes* procs, int* handle, const std::string& command,
                           const std::string& log) {
  *handle = procs->Start(kCli, command + " --monitor 127.0.0.1:0", log);
  const std::string address =
      procs->WaitForOutput(*handle, "monitor: http://(127\\.0\\.0\\.1:[0-9]+)/", 60);
  EXPECT_FALSE(address.empty()) << procs->Output(*handle);
  return address;
}

TEST(MonitorTest, ExpositionEscapesLabelsAndAccumulatesBuckets) {
  Exposition e;
  e.Family("x_total", "counter", "A help\nline");
  e.Sample("x_total", {{"reason", "a \"quoted\" \\ path\nnext"}}, 3);
  fedprof::Histogram h{{1, 5}};
  h.Observe(0.5);
  h.Observe(2);
  h.Observe(7);
  e.Histogram("d_seconds", "durations", h);
  const std::string& t = e.text();
  EXPECT_NE(t.find("# HELP x_total A help\\nline\n# TYPE x_total counter\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_total{reason=\"a \\\"quoted\\\" \\\\ path\\nnext\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("d_seconds_bucket{le=\"1\"} 1\nd_seconds_bucket{le=\"5\"} 2\n"
                   "d_seconds_bucket{le=\"+Inf\"} 3\nd_seconds_sum 9.5\nd_seconds_count 3\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatSampleValue(10), "10");
  EXPECT_EQ(FormatSampleValue(-3e6), "-3000000");
  EXPECT_EQ(FormatSampleValue(1e300), "1e+300");
}

TEST(MonitorTest, RefusalReasonsBecomeFewLabels) {
  EXPECT_EQ(ReasonLabel("a sample count of 5000000 outside [1, 1000000]"), "a sample count of");
  EXPECT_EQ(ReasonLabel("loss is NaN"), "loss is NaN");
  EXPECT_EQ(ReasonLabel("\x01\x02"), "other");
  EXPECT_LE(ReasonLabel(std::string(500, 'x')).size(), 48u);
}

TEST(MonitorTest, OffLoopbackNeedsATokenAndTheTokenGuardsTheData) {
  MonitorOptions open;
  open.listen = "0.0.0.0:0";
  ExpectError([&] { RunMonitor{open}; }, "--monitor-token-file");
  open.listen = "localhost";
  ExpectError([&] { RunMonitor{open}; }, "is not HOST:PORT");

  const std::string dir = FreshDir("monitor", "token");
  WriteFileAtomic(dir + "/token", "0123456789abcdef0123\n");
  MonitorOptions options;
  options.listen = "127.0.0.1:0";
  options.token_file = dir + "/token";
  options.mode = "simulate";
  RunMonitor monitor(options);
  const std::string address = std::regex_replace(monitor.url(), std::regex("^http://|/$"), "");
  ExpectError([&] { MonitorGet(address, "/status", "", "", 5); }, "401");
  ExpectError([&] { MonitorGet(address, "/metrics", "wrong-token-wrong", "", 5); }, "401");
  EXPECT_NE(MonitorGet(address, "/status", "0123456789abcdef0123", "", 5).find("\"mode\":\"simulate\""),
            std::string::npos);
  // Liveness and the page itself hold nothing of the run.
  EXPECT_EQ(MonitorGet(address, "/healthz", "", "", 5), "ok\n");
  EXPECT_NE(MonitorGet(address, "/", "", "", 5).find("FedProf monitor"), std::string::npos);
  ExpectError([&] { MonitorGet(address, "/../etc/passwd", "", "", 5); }, "answered 4");
}

// The whole path an operator uses: a simulation with --monitor, /metrics
// scraped twice while it runs and read by Prometheus' own parser, the
// counters moving between the scrapes; `fedprof status` of the running run
// and then of its directory once it is killed.
TEST(MonitorTest, MetricsMoveDuringASimulation) {
  const std::string dir = FreshDir("monitor", "simulate");
  Processes procs;
  int sim = -1;
  const std::string address = StartMonitored(
      &procs, &sim,
      "simulate " + SmallRun(10, 0.3, 2000) + " --set strategy.name=fedprof --out " + dir + "/run",
      dir + "/sim.log");
  ASSERT_FALSE(address.empty());
  ASSERT_TRUE(WaitUntil([&] { return Round(address) >= 1; }, 120)) << procs.Output(sim);
  const nlohmann::json first = Scrape("http://" + address);
  const double round1 = Sample(first, "fedprof_round{}");
  ASSERT_TRUE(WaitUntil([&] { return Round(address) >= round1 + 2; }, 120)) << procs.Output(sim);
  const nlohmann::json second = Scrape("http://" + address);

  EXPECT_EQ(second.at("# TYPE fedprof_client_results"), "counter");
  EXPECT_EQ(second.at("# TYPE fedprof_round_duration_seconds"), "histogram");
  EXPECT_GE(Sample(second, "fedprof_round{}"), round1 + 2);
  EXPECT_EQ(Sample(second, "fedprof_clients{}"), 10);
  EXPECT_EQ(Sample(second, "fedprof_clients_connected{}"), 10);
  EXPECT_GT(Sample(second, "fedprof_client_results_total{outcome=\"returned\"}"),
            Sample(first, "fedprof_client_results_total{outcome=\"returned\"}"));
  EXPECT_GT(Sample(second, "fedprof_clients_selected_total{}"),
            Sample(first, "fedprof_clients_selected_total{}"));
  EXPECT_GT(Sample(second, "fedprof_round_duration_seconds_count{}"),
            Sample(first, "fedprof_round_duration_seconds_count{}"));
  const double accuracy = Sample(second, "fedprof_accuracy{evaluation=\"central\"}");
  EXPECT_GT(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_GT(Sample(second, "fedprof_round_phase_seconds_total{phase=\"train\"}"), 0.0);
  // Simulated clients have data kinds: 3 selected a round, all counted.
  double by_kind = 0;
  for (const auto& [key, value] : second.items()) {
    if (key.rfind("fedprof_selections_total{data_kind=", 0) == 0) by_kind += value.get<double>();
  }
  EXPECT_EQ(by_kind, Sample(second, "fedprof_clients_selected_total{}"));
  EXPECT_GT(Sample(second, "process_resident_memory_bytes{}"), 1e6);

  int code = -1;
  const std::string status = Capture(kCli + " status " + address + " --json", &code);
  ASSERT_EQ(code, 0) << status;
  const nlohmann::json s = nlohmann::json::parse(status);
  EXPECT_EQ(s.at("mode"), "simulate");
  EXPECT_EQ(s.at("state"), "running");
  EXPECT_EQ(s.at("run_id"), dir + "/run");
  EXPECT_EQ(s.at("config_digest").get<std::string>().size(), 64u);
  EXPECT_EQ(s.at("clients").at("total"), 10);

  procs.Kill(sim);
  const std::string summary = Capture(kCli + " status " + dir + "/run", &code);
  ASSERT_EQ(code, 0) << summary;
  EXPECT_NE(summary.find("stopped, round "), std::string::npos) << summary;
  EXPECT_NE(summary.find("resume: fedprof simulate --resume " + dir + "/run"), std::string::npos)
      << summary;
  const std::string none = Capture(kCli + " status " + dir + " 2>&1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(none.find("not a run directory"), std::string::npos) << none;
}

// The dashboard as a person sees it: Debian's Chromium loads the page from
// a running simulation's monitor, runs its script and renders the round and
// the accuracy the run has reached.
TEST(MonitorTest, DashboardShowsTheRoundAndAccuracyInChromium) {
  const char* chromium = "/usr/bin/chromium";
  if (!FileExists(chromium)) {
    GTEST_SKIP() << "no Chromium at /usr/bin/chromium (scripts/install-deps.sh installs the "
                    "Debian package chromium); the dashboard test needs a real browser";
  }
  const std::string dir = FreshDir("monitor", "dashboard");
  Processes procs;
  int sim = -1;
  const std::string address = StartMonitored(
      &procs, &sim, "simulate " + SmallRun(10, 0.3, 2000) + " --out " + dir + "/run",
      dir + "/sim.log");
  ASSERT_FALSE(address.empty());
  ASSERT_TRUE(WaitUntil([&] { return Round(address) >= 2; }, 120)) << procs.Output(sim);
  int code = -1;
  // Chromium, driven by its DevTools protocol, loads the page and hands back
  // its HTML once its script shows a round of at least 2 and Chart.js has
  // drawn the accuracy chart (sized its canvas), within a bounded wait.
  const std::string shown_by_then =
      "/^[0-9]+$/.test(document.getElementById('round').textContent) && "
      "+document.getElementById('round').textContent >= 2 && "
      "document.getElementById('c_acc').style.boxSizing === 'border-box'";
  const std::string dom = Capture(kRenderedPage + " " + chromium + " http://" + address + "/ \"" +
                                      shown_by_then + "\" " + std::to_string(60 * kTimeScale),
                                  &code);
  const nlohmann::json status = Status(address);
  procs.Kill(sim);
  ASSERT_EQ(code, 0) << dom;
  // The rendered page, read by an HTML parser: each element with an id.
  const std::string dom_file = dir + "/dom.html";
  WriteFileAtomic(dom_file, dom);
  const nlohmann::json page =
      nlohmann::json::parse(Capture(kElements + " < " + dom_file, &code), nullptr, false);
  ASSERT_EQ(code, 0);
  ASSERT_TRUE(page.is_object() && page.contains("round") && page.contains("accuracy") &&
              page.contains("error") && page.contains("c_acc"))
      << dom;
  const int64_t shown = std::stoll(page["round"]["text"].get<std::string>());
  EXPECT_GE(shown, 2);
  EXPECT_LE(shown, status.value("round", int64_t{0}));
  const std::string accuracy = page["accuracy"]["text"].get<std::string>();
  ASSERT_EQ(accuracy.size(), 6u) << accuracy;  // 0.dddd
  EXPECT_GT(std::stod(accuracy), 0.0);
  // The charts were drawn: Chart.js, served by the monitor, sized the canvas.
  EXPECT_NE(page["c_acc"]["style"].get<std::string>().find("box-sizing: border-box"),
            std::string::npos)
      << dom;
  // Every poll was answered: the page's error line is empty.
  EXPECT_EQ(page["error"]["text"], "") << dom;
}

// A loopback deployment of 4 clients with mutual TLS, watched as an
// operator would: /metrics shows the connected clients and each round's
// returned results, and a client killed mid-run shows up as a timed-out
// result and one client fewer connected.
TEST(MonitorTest, DeploymentShowsConnectedClientsAndAKilledOneTimingOut) {
  const std::string dir = FreshDir("monitor", "deploy");
  const std::string certs = dir + "/certs";
  ASSERT_EQ(std::system(("bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh " + certs +
                         " 4 > /dev/null 2>&1").c_str()),
            0);
  // Enough rounds (about 0.15 s each, 9 s in all) for the scrapes to see the
  // run go on with one client fewer (2 s of heartbeats) before it ends.
  const std::string run = SmallRun(4, 1.0, 60) +
                          " --set deploy.heartbeat_s=0.2 --set deploy.heartbeat_timeout_s=2 "
                          "--set deploy.round_timeout_s=60 --set deploy.start_timeout_s=60";
  Processes procs;
  int server = -1;
  const std::string monitor = StartMonitored(
      &procs, &server,
      "server --listen 127.0.0.1:0 " + run + " --tls-dir " + certs + " --out " + dir + "/server",
      dir + "/server.log");
  ASSERT_FALSE(monitor.empty());
  const std::string listen = procs.WaitForOutput(server, "listening on (127\\.0\\.0\\.1:[0-9]+)", 60);
  ASSERT_FALSE(listen.empty()) << procs.Output(server);
  std::vector<int> clients;
  for (int k = 0; k < 4; ++k) {
    clients.push_back(procs.Start(kCli, "client --server " + listen + " --id " + std::to_string(k) +
                                            " " + run + " --tls-dir " + certs,
                                  dir + "/client-" + std::to_string(k) + ".log"));
  }
  // The connected-clients gauge is sampled once a second.
  nlohmann::json before;
  ASSERT_TRUE(ScrapeUntil(monitor, 120, &before, [](const nlohmann::json& m) {
    return m.value("fedprof_round{}", 0.0) >= 1 && m.value("fedprof_clients_connected{}", 0.0) == 4;
  })) << before.dump(1) << procs.Output(server);
  const double returned = Sample(before, "fedprof_client_results_total{outcome=\"returned\"}");
  EXPECT_GE(returned, 4 * Sample(before, "fedprof_round{}"));
  EXPECT_GT(Sample(before, "fedprof_sent_bytes_total{}"), 0);
  EXPECT_GT(Sample(before, "fedprof_received_bytes_total{}"), 0);
  EXPECT_EQ(Sample(before, "fedprof_client_results_total{outcome=\"timed_out\"}"), 0);

  procs.Kill(clients[3]);
  nlohmann::json after;
  ASSERT_TRUE(ScrapeUntil(monitor, 60, &after, [](const nlohmann::json& m) {
    return m.value("fedprof_client_results_total{outcome=\"timed_out\"}", 0.0) >= 1 &&
           m.value("fedprof_clients_connected{}", 0.0) == 3;
  })) << after.dump(1) << procs.Output(server);
  EXPECT_GT(Sample(after, "fedprof_client_results_total{outcome=\"returned\"}"), returned);
  ASSERT_EQ(procs.Wait(server, 120), 0) << procs.Output(server);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(procs.Wait(clients[k], 30), 0) << procs.Output(clients[k]);
}

}  // namespace
}  // namespace fedprof
