// fedprof launch: the ranks of a distributed simulation on this machine,
// started the way torchrun starts them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/distributed/rank_environment.h"
#include "tools/fedprof/commands.h"

extern char** environ;

namespace fedprof::cli {
namespace {

// After a rank fails, the others get this long to notice and end with their
// own line (a lost peer is seen at once); then SIGTERM, then SIGKILL.
constexpr double kReportGraceS = 5;
constexpr double kTermGraceS = 5;

struct LaunchArgs {
  int nproc = 0;
  int master_port = 0;
  std::vector<std::string> command;
  MonitorArgs monitor;  // handed to the command; rank 0 serves it
};

// A port no one listens on now (the kernel's choice), as torchrun picks one.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("launch: cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok) throw Error("launch: cannot find a free port; give one with --master-port");
  return ntohs(addr.sin_port);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "ended";
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The environment of rank `rank`: this one's, with the torchrun variables set.
std::vector<std::string> RankEnvironment(int rank, int nproc, int port) {
  const auto ours = LocalRankEnvironment(rank, nproc, port);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : ours) replaced = replaced || name == key;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [key, value] : ours) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void Launch(const LaunchArgs& args) {
  if (args.command.empty() || args.command[0] != "simulate") {
    throw Error("launch: runs 'simulate' distributed; expected: fedprof launch --nproc N -- "
                "simulate [options], got '" +
                (args.command.empty() ? std::string() : args.command[0]) + "'");
  }
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) throw Error("launch: cannot find this executable");
  self[len] = '\0';
  const int port = args.master_port > 0 ? args.master_port : FreePort();
  std::vector<std::string> argv_strings = {self};
  argv_strings.insert(argv_strings.end(), args.command.begin(), args.command.end());
  const std::vector<std::string> monitor = MonitorArgv(args.monitor);
  argv_strings.insert(argv_strings.end(), monitor.begin(), monitor.end());
  std::vector<char*> argv = Pointers(argv_strings);

  // Signals are taken synchronously (sigtimedwait) while the ranks run.
  sigset_t watched, previous;
  sigemptyset(&watched);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, s);
  sigprocmask(SIG_BLOCK, &watched, &previous);

  std::vector<pid_t> pids(args.nproc, -1);
  int alive = 0;
  auto signal_all = [&](int sig) {
    for (pid_t pid : pids) {
      if (pid > 0) ::kill(pid, sig);
    }
  };
  std::string failure;
  for (int rank = 0; rank < args.nproc && failure.empty(); ++rank) {
    std::vector<std::string> env_strings = RankEnvironment(rank, args.nproc, port);
    std::vector<char*> envp = Pointers(env_strings);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // A rank never outlives the launcher, however the launcher ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      ::execve(self, argv.data(), envp.data());
      ::_exit(127);
    }
    if (pid < 0) {
      failure = "cannot start rank " + std::to_string(rank) + ": " + std::strerror(errno);
    } else {
      pids[rank] = pid;
      ++alive;
    }
  }

  // Until every rank has ended: after the first failure, the others get
  // kReportGraceS to end by themselves, then SIGTERM, then SIGKILL.
  enum class Phase { kRunning, kReporting, kTerminating, kKilling };
  Phase phase = failure.empty() ? Phase::kRunning : Phase::kTerminating;
  double deadline = Now() + kTermGraceS;
  if (phase == Phase::kTerminating) {
    signal_all(SIGTERM);
    signal_all(SIGCONT);
  }
  while (alive > 0) {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (int rank = 0; rank < args.nproc; ++rank) {
        if (pids[rank] != pid) continue;
        pids[rank] = -1;
        --alive;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && failure.empty()) {
          failure = "rank " + std::to_string(rank) + " " + Describe(status);
          if (phase == Phase::kRunning) {
            phase = Phase::kReporting;
            deadline = Now() + kReportGraceS;
          }
        }
      }
    }
    if (alive == 0) break;
    const double now = Now();
    if (phase == Phase::kReporting && now >= deadline) {
      signal_all(SIGTERM);
      signal_all(SIGCONT);  // a stopped rank takes SIGTERM only once continued
      phase = Phase::kTerminating;
      deadline = now + kTermGraceS;
    } else if (phase == Phase::kTerminating && now >= deadline) {
      signal_all(SIGKILL);
      phase = Phase::kKilling;
    }
    const double wait_s = phase == Phase::kRunning || phase == Phase::kKilling
                              ? 1.0
                              : std::max(0.01, std::min(1.0, deadline - Now()));
    timespec ts;
    ts.tv_sec = static_cast<time_t>(wait_s);
    ts.tv_nsec = static_cast<long>((wait_s - static_cast<double>(ts.tv_sec)) * 1e9);
    const int sig = ::sigtimedwait(&watched, nullptr, &ts);
    if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) &&
        (phase == Phase::kRunning || phase == Phase::kReporting)) {
      if (failure.empty()) failure = std::string("stopped by ") + ::strsignal(sig);
      signal_all(SIGTERM);
      signal_all(SIGCONT);
      phase = Phase::kTerminating;
      deadline = Now() + kTermGraceS;
    }
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  if (!failure.empty()) throw Error("launch: " + failure);
}

}  // namespace

Runner AddLaunch(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* sub = app.add_subcommand(
      "launch", "Start N ranks of a distributed simulation on this machine, as torchrun does");
  sub->add_option("--nproc", args->nproc, "Ranks to start (rank 0 runs the server)")
      ->required()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--master-port", args->master_port,
                  "Port of rank 0's rendezvous store (MASTER_PORT); 0 = a free port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  AddMonitorOptions(sub, &args->monitor);
  sub->add_option("command", args->command, "-- simulate [its options], run by every rank")
      ->required();
  sub->footer(
      "Each rank gets MASTER_ADDR=127.0.0.1, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK and\n"
      "LOCAL_WORLD_SIZE; their output is this command's. When a rank fails the others end\n"
      "(SIGTERM, then SIGKILL) and launch exits 1. On several machines, set the same variables\n"
      "yourself (or use torchrun) and run fedprof simulate on each.");
  return [args] { Launch(*args); };
}

}  // namespace fedprof::cli
