#include "fedprof/federation/run_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"

namespace fedprof::federation {
namespace {

// The line `fedprof server` prints once it listens (GrpcTransport::Open).
constexpr const char* kListening = "fedprof server: listening on ";
// What its last line says when it ends with an error.
constexpr const char* kErrorLine = "fedprof: error: ";
constexpr const char* kInternalErrorLine = "fedprof: internal error: ";

std::string OutDir(const std::string& run_dir) { return run_dir + "/out"; }
std::string LogPath(const std::string& run_dir) { return run_dir + "/log.txt"; }

// The last line of `text` that starts with `prefix`, without it ("" = none).
std::string LastLineStarting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string found;
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, prefix.size(), prefix) == 0) found = line.substr(prefix.size());
  }
  return found;
}

// Starts `argv` with stdout and stderr appended to `log`, as a child that
// the kernel kills when the calling thread ends (PR_SET_PDEATHSIG), with no
// descriptor of the federation's open. Between fork and exec only calls
// that are safe in the child of a threaded process.
int Spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("cannot start a run's server: fork failed");
  if (pid == 0) {
    // The federation blocks SIGTERM for its own sigwait; its runs' servers
    // take it as a request to stop.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the federation went first
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) ::_exit(127);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int i = 3; i < 4096; ++i) ::close(i);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

std::string RunDir(const std::string& state_dir, int64_t run) {
  return state_dir + "/runs/" + std::to_string(run);
}

RunSupervisor::RunSupervisor(Store* store, RunHost host, std::function<void()> changed)
    : store_(store), host_(std::move(host)), changed_(std::move(changed)) {
  thread_ = std::thread([this] { Loop(); });
}

RunSupervisor::~RunSupervisor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // The thread that forked the runs' servers has ended: the kernel kills
  // them (PDEATHSIG); reap them.
  for (const auto& [id, child] : children_) ::waitpid(child.pid, nullptr, 0);
}

double RunSupervisor::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t RunSupervisor::Submit(RunRecord record, const std::string& model_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  record.state = kRunQueued;
  record.submitted_at = UtcNow();
  const int64_t id = store_->AddRun(record);
  record.id = id;
  const std::string dir = RunDir(host_.state_dir, id);
  try {
    MakeDirs(dir);
    if (!model_bytes.empty()) {
      // The module the operator sent, where the run's server reads it.
      const std::string model = dir + "/model.pt";
      WriteFileAtomic(model, model_bytes);
      Config config;
      config.MergeTomlString(record.config, "the submitted config");
      config.Set("model.file", model, "the federation");
      record.config = config.ToToml();
    }
    WriteFileAtomic(dir + "/config.toml", record.config);
  } catch (const Error& e) {
    record.state = kRunFailed;
    record.detail = std::string("the federation could not keep it: ") + e.what();
    record.finished_at = UtcNow();
  }
  store_->UpdateRun(record);
  store_->Audit(record.submitted_by, "submit", "run-" + std::to_string(id),
                record.name + " (" + record.strategy + ", " + std::to_string(record.rounds) + " rounds)");
  wake_.notify_all();
  return id;
}

std::string RunSupervisor::Stop(int64_t id, const std::string& by) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<RunRecord> run = store_->Run(id);
  if (!run) return "there is no run " + std::to_string(id);
  if (Ended(run->state)) return "run " + std::to_string(id) + " is " + run->state + " already";
  if (run->state == kRunStopping) return "";
  run->stop_requested_by = by;
  store_->Audit(by, "stop", "run-" + std::to_string(id), "was " + run->state);
  auto child = children_.find(id);
  if (child == children_.end()) {  // queued: it never starts
    run->state = kRunStopped;
    run->detail = "stopped by " + by + " before it started";
    run->finished_at = UtcNow();
    store_->UpdateRun(*run);
    return "";
  }
  run->state = kRunStopping;
  run->detail = "stopping at the end of its round in progress (asked by " + by + ")";
  store_->UpdateRun(*run);
  ::kill(child->second.pid, SIGTERM);
  child->second.term_sent_at = Now();
  changed_since_ = true;
  wake_.notify_all();  // the supervisor's thread tells the nodes
  return "";
}

std::pair<int64_t, double> RunSupervisor::Progress(int64_t id) const {
  const std::string metrics = OutDir(RunDir(host_.state_dir, id)) + "/metrics.csv";
  if (!FileExists(metrics)) return {0, std::numeric_limits<double>::quiet_NaN()};
  std::istringstream lines(ReadFile(metrics));
  std::string header, line, last;
  std::getline(lines, header);
  int64_t rows = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    ++rows;
    last = line;
  }
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::string> names = Split(header, ',');
  const std::vector<std::string> cells = Split(last, ',');
  for (size_t i = 0; i < names.size() && i < cells.size(); ++i) {
    if (names[i] == "accuracy") accuracy = std::strtod(cells[i].c_str(), nullptr);
  }
  return {rows, accuracy};
}

void RunSupervisor::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  bool resumed = false;
  while (!stopping_) {
    try {
      if (!resumed) Resume();
      resumed = true;
      Reap();
      ReadAddresses();
      EnforceStops();
      StartQueued();
    } catch (const std::exception& e) {
      LogWarning(std::string("federation: ") + e.what());
    }
    if (changed_since_ && changed_) {
      // Told with the lock released: listeners answer gRPC calls and read the store.
      changed_since_ = false;
      lock.unlock();
      changed_();
      lock.lock();
      continue;
    }
    wake_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

void RunSupervisor::Resume() {
  for (RunRecord& run : store_->ActiveRuns()) {
    if (run.state == kRunQueued) continue;
    const std::string target = "run-" + std::to_string(run.id);
    if (!run.stop_requested_by.empty()) {
      run.state = kRunStopped;
      run.detail = "stopped by " + run.stop_requested_by + " (the federation restarted meanwhile)";
      run.finished_at = UtcNow();
      store_->UpdateRun(run);
      continue;
    }
    store_->Audit("federation", "restart", target, "was " + run.state + " when the federation stopped");
    // Queued again, first in line (by id), on its port of before if it can.
    const size_t colon = run.address.rfind(':');
    if (colon != std::string::npos) last_port_[run.id] = std::atoi(run.address.c_str() + colon + 1);
    run.address.clear();
    run.state = kRunQueued;
    run.detail = "resuming from its checkpoint (the federation restarted)";
    store_->UpdateRun(run);
    changed_since_ = true;  // offered as resuming: the nodes serving it keep their clients on it
  }
}

void RunSupervisor::StartQueued() {
  int active = static_cast<int>(children_.size());
  for (RunRecord& run : store_->ActiveRuns()) {
    if (active >= host_.max_runs) return;
    if (run.state != kRunQueued) continue;
    Start(run);
    if (children_.count(run.id) != 0) ++active;
  }
}

int RunSupervisor::FreePort(int preferred) const {
  if (host_.first_port == 0) return 0;
  const auto taken = [&](int port) {
    for (const auto& [id, child] : children_) {
      if (child.port == port) return true;
    }
    return false;
  };
  if (preferred >= host_.first_port && preferred <= host_.last_port && !taken(preferred)) return preferred;
  for (int port = host_.first_port; port <= host_.last_port; ++port) {
    if (!taken(port)) return port;
  }
  return -1;
}

void RunSupervisor::Start(RunRecord& run) {
  const std::string dir = RunDir(host_.state_dir, run.id);
  const auto last = last_port_.find(run.id);
  const int port = FreePort(last == last_port_.end() ? 0 : last->second);
  if (port < 0) {
    if (run.detail != "waiting for a free port of --run-ports") {
      run.detail = "waiting for a free port of --run-ports";
      store_->UpdateRun(run);
    }
    return;
  }
  last_port_.erase(run.id);
  std::vector<std::string> argv = {host_.fedprof, "server"};
  const std::string out = OutDir(dir);
  // A run that finished a round resumes from its checkpoint; one that
  // never did starts again.
  if (FileExists(out + "/checkpoint.bin")) {
    argv.insert(argv.end(), {"--resume", out});
  } else {
    argv.insert(argv.end(), {"--config", dir + "/config.toml", "--out", out, "--overwrite"});
  }
  argv.insert(argv.end(), {"--listen", host_.host + ":" + std::to_string(port)});
  // The submitter's config, read by the server as untrusted: its files only
  // under the federation's --data-root (and the run's own module, in its
  // folder), and no file's content in an error line the submitter reads.
  argv.insert(argv.end(), {"--foreign-config", "--data-root", dir});
  // Its log says each round, whatever the config: `federation logs --follow`
  // is how an operator watches a run.
  argv.insert(argv.end(), {"--set", "report.progress=true"});
  for (const std::string& root : host_.data_roots) argv.insert(argv.end(), {"--data-root", root});
  if (host_.insecure) {
    argv.push_back("--insecure");
  } else {
    argv.insert(argv.end(), {"--tls-dir", host_.tls_dir, "--access", host_.state_dir + "/access.json"});
  }
  const std::string log = LogPath(dir);
  const size_t log_from = FileExists(log) ? ReadFile(log).size() : 0;
  const int pid = Spawn(argv, log);
  children_[run.id] = Child{pid, port, -1, log_from};
  LogProgress("federation: run " + std::to_string(run.id) + ": " +
              (argv[2] == "--resume" ? "resuming its server from its checkpoint" : "starting its server") +
              " on port " + std::to_string(port) + " (pid " + std::to_string(pid) +
              "); offered to the nodes once it listens");
  run.state = kRunStarting;
  run.detail = "starting its server";
  if (run.started_at.empty()) run.started_at = UtcNow();
  store_->UpdateRun(run);
  store_->Audit("federation", "start", "run-" + std::to_string(run.id), "pid " + std::to_string(pid));
}

void RunSupervisor::ReadAddresses() {
  for (auto& [id, child] : children_) {
    std::optional<RunRecord> run = store_->Run(id);
    if (!run || run->state != kRunStarting) continue;
    // This start's own line: a resumed run's log holds its earlier starts'.
    const std::string log = ReadFile(LogPath(RunDir(host_.state_dir, id)));
    const std::string lines = "\n" + log.substr(std::min(child.log_from, log.size()));
    const size_t at = lines.find(std::string("\n") + kListening);
    if (at == std::string::npos) continue;
    const size_t from = at + 1 + std::string(kListening).size();
    run->address = lines.substr(from, lines.find(' ', from) - from);
    LogProgress("federation: run " + std::to_string(id) + ": its server listens at " + run->address);
    run->state = kRunRunning;
    run->detail.clear();
    store_->UpdateRun(*run);
    changed_since_ = true;
  }
}

void RunSupervisor::EnforceStops() {
  for (auto& [id, child] : children_) {
    if (child.term_sent_at >= 0 && Now() - child.term_sent_at > host_.stop_grace_s) {
      ::kill(child.pid, SIGKILL);
      child.term_sent_at = std::numeric_limits<double>::infinity();  // once
    }
  }
}

void RunSupervisor::Reap() {
  for (auto it = children_.begin(); it != children_.end();) {
    int status = 0;
    if (::waitpid(it->second.pid, &status, WNOHANG) != it->second.pid) {
      ++it;
      continue;
    }
    const int64_t id = it->first;
    it = children_.erase(it);
    std::optional<RunRecord> run = store_->Run(id);
    if (!run) continue;
    const std::string target = "run-" + std::to_string(id);
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const int64_t rounds = Progress(id).first;
    run->finished_at = UtcNow();
    run->address.clear();
    if (!run->stop_requested_by.empty() && !(clean && rounds >= run->rounds)) {
      run->state = kRunStopped;
      run->detail = "stopped by " + run->stop_requested_by + " after round " +
                    std::to_string(Progress(id).first);
      store_->Audit("federation", "stopped", target, run->detail);
    } else if (clean) {
      run->state = kRunFinished;
      run->detail.clear();
      store_->Audit("federation", "finish", target, std::to_string(Progress(id).first) + " rounds");
    } else {
      const std::string log = ReadFile(LogPath(RunDir(host_.state_dir, id)));
      std::string error = LastLineStarting(log, kErrorLine);
      if (error.empty()) error = LastLineStarting(log, kInternalErrorLine);
      run->state = kRunFailed;
      run->detail = !error.empty()        ? Printable(error, 1000)
                    : WIFSIGNALED(status) ? std::string("its server was killed (") + ::strsignal(WTERMSIG(status)) + ")"
                                          : "its server exited with status " + std::to_string(WEXITSTATUS(status));
      store_->Audit("federation", "fail", target, run->detail);
    }
    store_->UpdateRun(*run);
    changed_since_ = true;
  }
}

}  // namespace fedprof::federation
