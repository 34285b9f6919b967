#include "fedprof/distributed/rank_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

namespace fedprof {
namespace {

using Millis = std::chrono::milliseconds;

// Gloo tags of the parts of a message; each part is matched in order
// between a pair of ranks.
constexpr int kTagHeader = 1;
constexpr int kTagBytes = 2;
constexpr int kTagIds = 3;
constexpr int kTagFloats = 4;
// The header: magic, kind, arg, then the lengths of bytes, ids and floats.
constexpr int64_t kMagic = 0x46505244;  // "FPRD"
constexpr int64_t kHeaderSize = 6;
constexpr int64_t kMaxPart = int64_t{1} << 36;

int ParseInt(const char* name, const std::string& text, int64_t min, int64_t max,
             const std::string& expected) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < min || v > max) {
    throw Error(std::string(name) + ": '" + text + "' is not " + expected);
  }
  return static_cast<int>(v);
}

Millis ToMillis(double seconds) { return Millis(static_cast<int64_t>(seconds * 1000.0 + 0.5)); }

std::string FormatSeconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// Gloo's messages start with "[file:line] "; c10's carry a backtrace.
std::string Clean(std::string what) {
  if (!what.empty() && what[0] == '[') {
    const auto close = what.find("] ");
    if (close != std::string::npos) what = what.substr(close + 2);
  }
  const auto newline = what.find('\n');
  if (newline != std::string::npos) what = what.substr(0, newline);
  return what;
}

bool IsLoopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

// The interface Gloo binds, as torch.distributed picks it: GLOO_SOCKET_IFNAME
// when set; loopback when the master is local; else the address the host
// name resolves to.
std::shared_ptr<::gloo::transport::Device> MakeDevice(const std::string& master_addr) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (IsLoopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

DistEnv ReadDistEnv(const std::function<const char*(const char*)>& get) {
  auto value = [&](const char* name) -> std::string {
    const char* v = get ? get(name) : std::getenv(name);
    return v == nullptr ? "" : v;
  };
  DistEnv env;
  const std::string world = value("WORLD_SIZE");
  if (world.empty()) return env;
  env.world_size = ParseInt("WORLD_SIZE", world, 1, 1 << 20, "a number of ranks >= 1");
  if (env.world_size == 1) return env;
  const std::string needs = " (WORLD_SIZE is " + world +
                            "; a distributed run needs MASTER_ADDR, MASTER_PORT, WORLD_SIZE and "
                            "RANK, as torchrun sets them)";
  const std::string rank = value("RANK");
  if (rank.empty()) throw Error("RANK: not set" + needs);
  env.rank = ParseInt("RANK", rank, 0, env.world_size - 1,
                      "a rank in 0.." + std::to_string(env.world_size - 1) + " (WORLD_SIZE " +
                          world + ")");
  env.master_addr = value("MASTER_ADDR");
  if (env.master_addr.empty()) throw Error("MASTER_ADDR: not set" + needs);
  const std::string port = value("MASTER_PORT");
  if (port.empty()) throw Error("MASTER_PORT: not set" + needs);
  env.master_port = ParseInt("MASTER_PORT", port, 1, 65535, "a TCP port in 1..65535");
  env.agent_store = value("TORCHELASTIC_USE_AGENT_STORE") == "True";
  if (env.agent_store) {
    const std::string attempt = value("TORCHELASTIC_RESTART_COUNT");
    env.store_prefix = "/worker/attempt_" + (attempt.empty() ? std::string("0") : attempt);
  }
  const std::string local = value("LOCAL_WORLD_SIZE");
  if (!local.empty()) {
    env.local_world_size = ParseInt("LOCAL_WORLD_SIZE", local, 1, env.world_size,
                                    "a number of ranks in 1..WORLD_SIZE (" + world + ")");
  }
  return env;
}

struct RankGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  mutable std::mutex mutex;
  bool cancelled = false;
  bool failed = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> in_flight;
  // Operations that did not complete: Gloo may still write into their
  // buffers, so they live as long as the process.
  std::vector<c10::intrusive_ptr<c10d::Work>> abandoned;
  std::vector<int64_t> sent, received;  // bytes, by peer

  // Waits for `work` (a send to or receive from `peer`) up to `timeout_s`.
  void Wait(int peer, const c10::intrusive_ptr<c10d::Work>& work, bool sending, double timeout_s) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (cancelled) work->abort();
      in_flight.push_back(work);
    }
    const auto start = std::chrono::steady_clock::now();
    bool done = false;
    std::string failure;
    try {
      done = work->wait(ToMillis(timeout_s));
    } catch (const c10::Error& e) {
      failure = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool was_cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto it = in_flight.begin(); it != in_flight.end(); ++it) {
        if (*it == work) {
          in_flight.erase(it);
          break;
        }
      }
      if (done && failure.empty()) return;
      failed = true;
      abandoned.push_back(work);
      was_cancelled = cancelled;
    }
    if (was_cancelled) throw Error("the run was stopped after another rank failed");
    const std::string who = "rank " + std::to_string(peer);
    if (failure.empty() || failure.find("Timed out") != std::string::npos ||
        waited >= 0.99 * timeout_s) {
      throw RankError(peer, who + (sending ? " took nothing" : " sent nothing") + " for " +
                                FormatSeconds(timeout_s) + " s (dist.timeout_s)");
    }
    throw RankError(peer, who + " was lost (" + Clean(failure) + ")");
  }

  void Send(int peer, at::Tensor tensor, int tag, double timeout_s) {
    const int64_t bytes = tensor.numel() * tensor.element_size();
    std::vector<at::Tensor> tensors{std::move(tensor)};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = group->send(tensors, peer, tag);
    } catch (const std::exception& e) {
      MarkFailed();
      throw RankError(peer, "rank " + std::to_string(peer) + " was lost (" + Clean(e.what()) + ")");
    }
    Wait(peer, work, /*sending=*/true, timeout_s);
    std::lock_guard<std::mutex> lock(mutex);
    sent[peer] += bytes;
  }

  void Recv(int peer, at::Tensor tensor, int tag, double timeout_s) {
    const int64_t bytes = tensor.numel() * tensor.element_size();
    std::vector<at::Tensor> tensors{std::move(tensor)};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = group->recv(tensors, peer, tag);
    } catch (const std::exception& e) {
      MarkFailed();
      throw RankError(peer, "rank " + std::to_string(peer) + " was lost (" + Clean(e.what()) + ")");
    }
    Wait(peer, work, /*sending=*/false, timeout_s);
    std::lock_guard<std::mutex> lock(mutex);
    received[peer] += bytes;
  }

  void MarkFailed() {
    std::lock_guard<std::mutex> lock(mutex);
    failed = true;
  }

  void CheckUsable() const {
    std::lock_guard<std::mutex> lock(mutex);
    if (cancelled) throw Error("the run was stopped after another rank failed");
  }
};

RankGroup::RankGroup(const DistEnv& env, double timeout_s)
    : impl_(std::make_unique<Impl>()),
      rank_(env.rank),
      size_(env.world_size),
      timeout_s_(timeout_s) {
  // A write to a lost peer must be an error to report, not SIGPIPE's
  // silent death (Python, and so torchrun's usual ranks, ignore it too).
  std::signal(SIGPIPE, SIG_IGN);
  impl_->sent.assign(env.world_size, 0);
  impl_->received.assign(env.world_size, 0);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(env.master_port);
    options.isServer = env.rank == 0 && !env.agent_store;
    options.numWorkers = static_cast<size_t>(env.world_size);
    options.waitWorkers = !env.agent_store;
    options.timeout = ToMillis(timeout_s);
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    c10::intrusive_ptr<c10d::Store> base = impl_->store;
    if (!env.store_prefix.empty()) {
      base = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix, base);
    }
    auto store = c10::make_intrusive<c10d::PrefixStore>("fedprof", base);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(ToMillis(timeout_s));
    gloo_options->devices.push_back(MakeDevice(env.master_addr));
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world_size,
                                                               gloo_options);
  } catch (const std::exception& e) {
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    throw Error("rendezvous of " + std::to_string(env.world_size) + " ranks at " +
                env.master_addr + ":" + std::to_string(env.master_port) + " failed within " +
                FormatSeconds(timeout_s) + " s (dist.timeout_s): " +
                Clean(c10_error != nullptr ? c10_error->what_without_backtrace() : e.what()));
  }
}

RankGroup::~RankGroup() {
  bool broken;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    broken = impl_->failed || impl_->cancelled;
  }
  // Tearing down a group with operations Gloo never finished could block or
  // touch their buffers; the process is about to exit anyway, so the group
  // is parked (still reachable, not leaked) instead of destroyed.
  if (broken) {
    static std::mutex parked_mutex;
    static auto* parked = new std::vector<std::unique_ptr<Impl>>();  // never destroyed
    std::lock_guard<std::mutex> lock(parked_mutex);
    parked->push_back(std::move(impl_));
  }
}

namespace {

// A tensor that owns a copy of `n` values at `data`: Gloo may still read or
// write an abandoned operation's buffer, so every buffer it is handed lives
// as long as the operation.
at::Tensor OwnedCopy(const void* data, int64_t n, torch::Dtype dtype) {
  at::Tensor t = torch::empty({n}, dtype);
  if (n > 0) std::memcpy(t.data_ptr(), data, static_cast<size_t>(n) * t.element_size());
  return t;
}

at::Tensor FloatsOf(std::shared_ptr<const FlatParams> values) {
  float* data = const_cast<float*>(values->data());  // Gloo only reads a send's buffer
  const int64_t n = static_cast<int64_t>(values->size());
  return torch::from_blob(data, {n}, [values](void*) {}, torch::kFloat32);
}

}  // namespace

void RankGroup::Send(int to, const RankMessage& m) {
  impl_->CheckUsable();
  const int64_t num_floats = m.floats ? static_cast<int64_t>(m.floats->size()) : 0;
  const std::vector<int64_t> header = {kMagic, m.kind, m.arg, static_cast<int64_t>(m.bytes.size()),
                                       static_cast<int64_t>(m.ids.size()), num_floats};
  impl_->Send(to, OwnedCopy(header.data(), kHeaderSize, torch::kInt64), kTagHeader, timeout_s_);
  if (!m.bytes.empty()) {
    impl_->Send(to, OwnedCopy(m.bytes.data(), static_cast<int64_t>(m.bytes.size()), torch::kUInt8),
                kTagBytes, timeout_s_);
  }
  if (!m.ids.empty()) {
    impl_->Send(to, OwnedCopy(m.ids.data(), static_cast<int64_t>(m.ids.size()), torch::kInt32),
                kTagIds, timeout_s_);
  }
  if (num_floats > 0) impl_->Send(to, FloatsOf(m.floats), kTagFloats, timeout_s_);
}

RankMessage RankGroup::Recv(int from) {
  impl_->CheckUsable();
  at::Tensor header = torch::zeros({kHeaderSize}, torch::kInt64);
  impl_->Recv(from, header, kTagHeader, timeout_s_);
  const int64_t* h = header.data_ptr<int64_t>();
  for (int i = 3; i < kHeaderSize; ++i) {
    if (h[0] != kMagic || h[i] < 0 || h[i] > kMaxPart) {
      impl_->MarkFailed();
      throw RankError(from, "rank " + std::to_string(from) +
                                " sent a malformed message header (another program or version?)");
    }
  }
  RankMessage m;
  m.kind = h[1];
  m.arg = h[2];
  if (h[3] > 0) {
    at::Tensor bytes = torch::empty({h[3]}, torch::kUInt8);
    impl_->Recv(from, bytes, kTagBytes, timeout_s_);
    m.bytes.assign(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(h[3]));
  }
  if (h[4] > 0) {
    at::Tensor ids = torch::empty({h[4]}, torch::kInt32);
    impl_->Recv(from, ids, kTagIds, timeout_s_);
    const int32_t* p = ids.data_ptr<int32_t>();
    m.ids.assign(p, p + h[4]);
  }
  if (h[5] > 0) {
    auto values = std::make_shared<FlatParams>(static_cast<size_t>(h[5]));
    // The tensor shares ownership of the buffer (see OwnedCopy).
    at::Tensor t = torch::from_blob(values->data(), {h[5]}, [values](void*) {}, torch::kFloat32);
    impl_->Recv(from, std::move(t), kTagFloats, timeout_s_);
    m.floats = std::move(values);
  }
  return m;
}

void RankGroup::Cancel() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->cancelled = true;
  for (const auto& work : impl_->in_flight) work->abort();
}

int64_t RankGroup::bytes_sent(int peer) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->sent.at(peer);
}

int64_t RankGroup::bytes_received(int peer) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->received.at(peer);
}

bool RankGroup::cancelled() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cancelled;
}

}  // namespace fedprof
