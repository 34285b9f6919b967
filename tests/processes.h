#ifndef FEDPROF_TESTS_PROCESSES_H_
#define FEDPROF_TESTS_PROCESSES_H_

// Child processes for end-to-end tests of the networked commands: started
// with their output in a file, waited for with a bound, and never left
// behind (the destructor kills whatever still runs).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fedprof::testing_support {

// Under AddressSanitizer (make test-asan) everything runs several times
// slower: the bounds on waits below grow by this factor, and so must any
// window a test gives a server through its options.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kTimeScale = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr int kTimeScale = 4;
#else
inline constexpr int kTimeScale = 1;
#endif
#else
inline constexpr int kTimeScale = 1;
#endif

// A deadline `timeout_s` from now, scaled by kTimeScale.
inline std::chrono::steady_clock::time_point DeadlineIn(double timeout_s) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(timeout_s * kTimeScale));
}

// A TCP port on the loopback address that nothing listened on a moment ago;
// -1 when none could be had.
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  return bound ? ntohs(address.sin_port) : -1;
}

// Whether nothing listens on loopback port `port` now (a bind succeeds).
inline bool PortIsFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return free;
}

class Processes {
 public:
  ~Processes() {
    for (Child& c : children_) {
      if (c.running) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
    }
  }

  // Starts `program` with `args` (one string, split on spaces; no quoting),
  // stdout and stderr into `log`. Returns a handle.
  int Start(const std::string& program, const std::string& args, const std::string& log) {
    std::vector<std::string> parts = {program};
    std::istringstream in(args);
    for (std::string a; in >> a;) parts.push_back(a);
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& p : parts) argv.push_back(p.data());
      argv.push_back(nullptr);
      ::execv(program.c_str(), argv.data());
      std::_Exit(127);
    }
    children_.push_back({pid, log, true, -1});
    return static_cast<int>(children_.size()) - 1;
  }

  // The exit code once the child has ended within `timeout_s` (scaled),
  // else -1 (it is then killed). A child killed by a signal gives 128 + signal.
  int Wait(int handle, double timeout_s) {
    Child& c = children_.at(handle);
    const auto deadline = DeadlineIn(timeout_s);
    while (c.running) {
      int status = 0;
      const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
      if (r == c.pid) {
        c.running = false;
        c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        Kill(handle);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return c.code;
  }

  void Kill(int handle) {
    Child& c = children_.at(handle);
    if (!c.running) return;
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    c.running = false;
    c.code = 128 + SIGKILL;
  }

  bool Running(int handle) {
    Child& c = children_.at(handle);
    if (c.running) {
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.running = false;
        c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return c.running;
  }

  std::string Output(int handle) const {
    std::ifstream in(children_.at(handle).log);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Waits up to `timeout_s` (scaled) until the child's output matches
  // `pattern`; returns the first capture group ("" on timeout or if the
  // child ended first).
  std::string WaitForOutput(int handle, const std::string& pattern, double timeout_s) {
    const std::regex re(pattern);
    const auto deadline = DeadlineIn(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string out = Output(handle);
      if (std::regex_search(out, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
      if (!Running(handle)) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }

 private:
  struct Child {
    pid_t pid;
    std::string log;
    bool running;
    int code;
  };
  std::vector<Child> children_;
};

// Waits up to `timeout_s` (scaled) until `predicate` holds; false on timeout.
template <typename Predicate>
bool WaitUntil(Predicate predicate, double timeout_s) {
  const auto deadline = DeadlineIn(timeout_s);
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_PROCESSES_H_
