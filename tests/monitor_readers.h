#ifndef FEDPROF_TESTS_MONITOR_READERS_H_
#define FEDPROF_TESTS_MONITOR_READERS_H_

// Reading a monitor as its users do: /metrics through the Prometheus client
// library's parser (tests/monitor_scrape.py), a page as headless Chromium
// renders it (tests/rendered_page.py) read by an HTML parser
// (tests/dom_elements.py).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace fedprof::testing_support {

inline const std::string kScrape = "/usr/bin/python3 " FEDPROF_SOURCE_DIR "/tests/monitor_scrape.py";
inline const std::string kElements = "/usr/bin/python3 " FEDPROF_SOURCE_DIR "/tests/dom_elements.py";
inline const std::string kRenderedPage = "/usr/bin/python3 " FEDPROF_SOURCE_DIR "/tests/rendered_page.py";

// stdout of `command` (its exit code into *code).
inline std::string Capture(const std::string& command, int* code) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// /metrics of the monitor at `url`, parsed by prometheus_client: sample
// "name{labels}" -> value, and "# TYPE family" -> type.
inline nlohmann::json Scrape(const std::string& url, const std::string& token_file = "") {
  int code = -1;
  const std::string out = Capture(kScrape + " " + url + " " + token_file, &code);
  EXPECT_EQ(code, 0) << out;
  return code == 0 ? nlohmann::json::parse(out) : nlohmann::json::object();
}

// The value of sample `key` ("name{labels}"); a failure when it is missing.
inline double Sample(const nlohmann::json& samples, const std::string& key) {
  if (!samples.contains(key)) {
    ADD_FAILURE() << "no sample " << key << " in " << samples.dump(1);
    return -1;
  }
  return samples.at(key).get<double>();
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_MONITOR_READERS_H_
