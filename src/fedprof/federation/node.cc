#include "fedprof/federation/node.h"

#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/config/options.h"
#include "fedprof/config/paths.h"
#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/federation/policy.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/run/deployment.h"
#include "operator.grpc.pb.h"

namespace fedprof::federation {
namespace {

namespace pb = federation::v1;

// How long the node's sync waits at the federation for the runs to change,
// and the longest pause between two tries when the federation is away.
constexpr double kSyncWaitS = 10;
constexpr double kMaxBackOffS = 10;
// What the federation takes in one sync (node_service.cc).
constexpr int kMaxListed = 64;
constexpr size_t kMaxRuleBytes = 900;

// The first file of `dir` whose SHA-256 is `sha256`, or "".
std::string FindModule(const std::string& dir, const std::string& sha256) {
  if (dir.empty()) return "";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return "";
  std::string found;
  while (const dirent* entry = ::readdir(d)) {
    const std::string path = dir + "/" + entry->d_name;
    struct stat info {};
    if (entry->d_name[0] == '.' || ::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    try {
      if (FileSha256Hex(path) == sha256) {
        found = path;
        break;
      }
    } catch (const Error&) {
    }
  }
  ::closedir(d);
  return found;
}

std::string Range(int first, int last) {
  return first == last ? "client " + std::to_string(first)
                       : "clients " + std::to_string(first) + "-" + std::to_string(last);
}

struct Served {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
  // The federation no longer offers the run at the address served: its
  // clients here stop trying to reach that server at their next failure.
  std::shared_ptr<std::atomic<bool>> withdrawn = std::make_shared<std::atomic<bool>>(false);
  // Its clients were told so (and gave up, if they ended): an offer of the
  // run, at any address, is served anew.
  std::shared_ptr<std::atomic<bool>> told_withdrawn = std::make_shared<std::atomic<bool>>(false);
  bool resuming = false;  // offered without an address: its server is starting again
  std::shared_ptr<std::string> error = std::make_shared<std::string>();
};

class Node {
 public:
  explicit Node(const NodeOptions& options) : o_(options) {
    if (!o_.policy_file.empty()) policy_ = LoadPolicy(o_.policy_file);
    if (o_.policy_file.empty()) {
      LogWarning("node: no --policy: it serves every run the federation offers it");
    }
    // Counted beside the clients' keys and privacy ledgers.
    if (policy_.rounds_per_day > 0) {
      rounds_ = std::make_shared<RoundsPerDay>(o_.tls_dir.empty() ? "." : o_.tls_dir, policy_.rounds_per_day);
    }
    host_ = o_.server.substr(0, o_.server.rfind(':'));
    last_ = o_.last_id < 0 ? o_.id : o_.last_id;
    for (int id = o_.id; id <= last_; ++id) {
      grpc::ChannelArguments args;
      ExpectPeer(o_.tls_dir, "server", &args);
      stubs_[id] = pb::Nodes::NewStub(grpc::CreateCustomChannel(
          o_.server, o_.insecure ? grpc::InsecureChannelCredentials() : ClientCredentials(o_.tls_dir, id), args));
    }
  }

  ~Node() {
    // Runs still served end with the process.
    for (auto& [run, served] : served_) {
      if (served.thread.joinable()) served.thread.detach();
    }
  }

  // Syncs until `stop`; the sync in flight is in *in_flight, so that a signal can cancel it.
  void Run(const std::atomic<bool>& stop, std::mutex* cancel_mutex, grpc::ClientContext** in_flight) {
    auto last_contact = std::chrono::steady_clock::now();
    double back_off = 0.25;
    while (!stop) {
      bool reached = false;
      std::optional<std::vector<pb::RunOffer>> offers;
      for (int id = o_.id; id <= last_ && !stop; ++id) {
        if (refused_.count(id)) continue;
        // The first of its clients that can speak waits for a change, and
        // brings the offers.
        reached = Sync(id, /*lead=*/!offers, cancel_mutex, in_flight, &offers) || reached;
      }
      if (static_cast<int>(refused_.size()) == last_ - o_.id + 1) {
        throw Error("node: every client of this node was refused by the federation (each logged above)");
      }
      Reap();
      if (offers) Consider(*offers);
      if (reached) {
        last_contact = std::chrono::steady_clock::now();
        back_off = 0.25;
        if (warned_unreachable_) LogProgress("node: reached the federation at " + o_.server + " again");
        warned_unreachable_ = false;
        continue;
      }
      if (o_.give_up_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - last_contact).count() > o_.give_up_s) {
        throw Error("node: no answer from the federation at " + o_.server + " for " + FormatDouble(o_.give_up_s) +
                    " s (--give-up-after); giving up");
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(back_off));
      back_off = std::min(kMaxBackOffS, back_off * 2);
    }
  }

  void set_build(const std::string& version, const std::string& build) {
    o_version_ = version;
    o_build_ = build;
  }

 private:
  // What client `id` tells the federation: what it serves, what it
  // refused (within the federation's bounds for a sync: the rest go next
  // time), and, as the lead, that it waits for a change of the runs.
  pb::NodeSyncRequest RequestOf(int id, bool lead) {
    pb::NodeSyncRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(id);
    request.set_version(o_version_);
    request.set_build(o_build_);
    for (const auto& [run, served] : served_) {
      if (request.serving_size() < kMaxListed) request.add_serving(run);
    }
    const std::vector<pb::NodeRefusal>& pending = pending_[id];
    for (size_t i = 0; i < pending.size() && i < static_cast<size_t>(kMaxListed); ++i) {
      *request.add_refusals() = pending[i];
    }
    request.set_generation(lead ? generation_ : 0);
    request.set_wait_s(lead && generation_ > 0 ? kSyncWaitS : 0);
    return request;
  }

  // One sync of client `id`; whether the federation answered. A refusal
  // for good (revoked, not enrolled, another role's key) is logged once and
  // ends that client's syncing.
  bool Sync(int id, bool lead, std::mutex* cancel_mutex, grpc::ClientContext** in_flight,
            std::optional<std::vector<pb::RunOffer>>* offers) {
    const pb::NodeSyncRequest request = RequestOf(id, lead);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(static_cast<int>(kSyncWaitS) + 15));
    {
      std::lock_guard<std::mutex> lock(*cancel_mutex);
      *in_flight = &context;
    }
    pb::NodeSyncReply reply;
    const grpc::Status status = stubs_.at(id)->Sync(&context, request, &reply);
    {
      std::lock_guard<std::mutex> lock(*cancel_mutex);
      *in_flight = nullptr;
    }
    if (status.ok()) {
      std::vector<pb::NodeRefusal>& told = pending_[id];
      told.erase(told.begin(), told.begin() + std::min<ptrdiff_t>(request.refusals_size(), told.size()));
      if (lead) {
        *offers = std::vector<pb::RunOffer>(reply.runs().begin(), reply.runs().end());
        generation_ = reply.generation();
      }
      return true;
    }
    const grpc::StatusCode code = status.error_code();
    if (code == grpc::StatusCode::PERMISSION_DENIED || code == grpc::StatusCode::UNAUTHENTICATED ||
        code == grpc::StatusCode::FAILED_PRECONDITION || code == grpc::StatusCode::INVALID_ARGUMENT) {
      refused_.insert(id);
      LogWarning("node: client " + std::to_string(id) + " refused by the federation: " +
                 Printable(status.error_message(), 400));
    } else if (code != grpc::StatusCode::CANCELLED && !warned_unreachable_) {
      LogWarning("node: cannot reach the federation at " + o_.server + " (" + Printable(status.error_message(), 200) +
                 "); trying again");
      warned_unreachable_ = true;
    }
    return false;
  }

  void Refuse(int64_t run, int first, int last, const std::string& rule) {
    LogWarning("node: " + Range(first, last) + ": refused run " + std::to_string(run) + ": " + rule);
    for (int id = first; id <= last; ++id) {
      pb::NodeRefusal refusal;
      refusal.set_run(run);
      refusal.set_rule(Printable(rule, kMaxRuleBytes));
      pending_[id].push_back(refusal);
    }
  }

  void Consider(const std::vector<pb::RunOffer>& offers) {
    for (auto& [run, served] : served_) {
      const auto offer = std::find_if(offers.begin(), offers.end(),
                                      [run = run](const pb::RunOffer& o) { return o.run() == run; });
      const std::string& address = seen_[run];
      const std::string what = "node: run " + std::to_string(run) + ": ";
      // Kept while offered where its clients serve it, or while its server
      // starts again (its clients keep trying, and find it where it was, or
      // give up once it is offered elsewhere).
      const bool resuming = offer != offers.end() && offer->resuming();
      const bool kept = offer != offers.end() && (resuming || offer->address() == address);
      if (resuming && !served.resuming) {
        LogProgress(what + "its server is starting again; its clients here keep trying " + address);
      } else if (!resuming && served.resuming && kept) {
        LogProgress(what + "its server is back at " + address);
      }
      served.resuming = resuming;
      if (served.withdrawn->exchange(!kept) != !kept) {
        LogProgress(what + (kept ? "offered again at " + address + "; its clients here stay on it"
                                 : (offer == offers.end() ? std::string("no longer offered")
                                                          : "offered at " + offer->address() + " now") +
                                       "; its clients here stop trying " + address + " at their next failure"));
      }
    }
    for (const pb::RunOffer& offer : offers) {
      if (offer.resuming()) continue;  // served where it was, or taken up once it has an address
      // A run is taken once; again only if it moved (its server started anew
      // elsewhere: the federation restarted) once its client here has given
      // up on the old address.
      const auto seen = seen_.find(offer.run());
      if (seen != seen_.end() &&
          (seen->second == offer.address() || seen->second.empty() || served_.count(offer.run()) != 0)) {
        continue;
      }
      seen_[offer.run()] = "";  // refused, unless served below
      Config config;
      try {
        config.MergeTomlString(offer.config(), "run " + std::to_string(offer.run()));
      } catch (const Error& e) {
        Refuse(offer.run(), o_.id, last_, std::string("its config does not parse on this node: ") + e.what());
        continue;
      }
      const int last = std::min<int>(last_, static_cast<int>(config.options().clients.count) - 1);
      if (last < o_.id) continue;  // none of its clients takes part
      std::string rule = o_.policy_file.empty() ? "" : PolicyRefusal(policy_, config);
      // The run's config is the submitter's: the files it names, only where
      // this node lets a run read; its module, only the node's own copy.
      if (rule.empty()) {
        const std::string policy = o_.policy_file.empty() ? std::string("none given") : o_.policy_file;
        rule = PathRefusal(config, policy_.read_roots, "this node's policy (" + policy + ", [paths] read)",
                           {"model.file", "dp.key_dir"});
      }
      if (rule.empty() && offer.model_sha256().empty() && !config.options().model.file.empty()) {
        rule = "it names model.file without the federation's copy of the module";
      }
      if (rule.empty()) config = OwnTerms(offer.run(), config);
      if (rule.empty() && !offer.model_sha256().empty()) {
        const std::string module = FindModule(o_.models_dir, offer.model_sha256());
        if (module.empty()) {
          rule = "it trains a TorchScript module (SHA-256 " + offer.model_sha256() +
                 ") of which --models-dir " + (o_.models_dir.empty() ? "(none given)" : o_.models_dir) +
                 " holds no copy";
        } else {
          config.Set("model.file", module, "the node's --models-dir");
        }
      }
      if (!rule.empty()) {
        Refuse(offer.run(), o_.id, last, rule);
        continue;
      }
      Serve(offer, config, last);
    }
  }

  // The config this node's clients run `run` under: the run's, on the
  // node's own terms (NodeClientConfig); what the run set otherwise is said
  // once.
  Config OwnTerms(int64_t run, const Config& asked) {
    Config own = NodeClientConfig(policy_, asked);
    std::vector<std::string> options = NodeOwnOptions();
    options.push_back("dp.key_dir");
    for (const std::string& option : options) {
      if (asked.Value(option) != own.Value(option) && asked.Value(option) != FindOption(option)->default_value) {
        LogProgress("node: run " + std::to_string(run) + " sets " + option + " = " +
                    Printable(asked.Value(option), 80) + "; this node's clients keep their own (" +
                    (own.Value(option).empty() ? std::string("their --tls-dir") : own.Value(option)) + ")");
      }
    }
    return own;
  }

  void Serve(const pb::RunOffer& offer, const Config& config, int last) {
    ClientOptions c;
    const std::string address = offer.address();
    c.server = host_ + ":" + address.substr(address.rfind(':') + 1);
    c.id = o_.id;
    c.last_id = last > o_.id ? last : -1;
    c.tls_dir = o_.tls_dir;
    c.insecure = o_.insecure;
    c.data_dir = o_.data_dir;
    // Its clients keep trying the run's server while the federation offers
    // it there (10,000 clients registering at once with a run's new server
    // take minutes on a small machine), and stop as soon as it does not.
    c.give_up_s = std::numeric_limits<double>::infinity();
    c.fit_none = o_.fit_none;
    const int64_t run = offer.run();
    if (rounds_) {
      c.admit_training = [rounds = rounds_, run](int id) {
        const std::string refused = rounds->Take(id);
        if (!refused.empty()) {
          LogWarning("node: client " + std::to_string(id) + ": run " + std::to_string(run) + ": " + refused);
        }
        return refused;
      };
    }
    const RunOptions& r = config.options();
    LogProgress("node: " + Range(o_.id, last) + ": serving run " + std::to_string(run) + " (" + r.strategy.name +
                ", " + std::to_string(r.rounds) + " rounds) at " + c.server);
    seen_[run] = address;
    Served& served = served_[run];
    c.withdrawn = [withdrawn = served.withdrawn, told = served.told_withdrawn] {
      const bool now = withdrawn->load();
      if (now) told->store(true);
      return now;
    };
    served.thread = std::thread([config, c, run, done = served.done, error = served.error] {
      try {
        RunClient(config, c);
      } catch (const std::exception& e) {
        *error = e.what();
      }
      done->store(true);
    });
  }

  void Reap() {
    for (auto it = served_.begin(); it != served_.end();) {
      if (!it->second.done->load()) {
        ++it;
        continue;
      }
      it->second.thread.join();
      const std::string& error = *it->second.error;
      const std::string run = "node: run " + std::to_string(it->first);
      if (it->second.told_withdrawn->load()) {
        // Its clients left because the run was no longer offered where they
        // served it: wherever it is offered next, it is served again.
        LogProgress(run + ": its clients here left " + seen_[it->first] + "; it is taken up again when offered");
        seen_.erase(it->first);
      } else if (error.empty()) {
        LogProgress(run + " is over");
      } else {
        LogWarning(run + " ended with an error: " + error);
      }
      it = served_.erase(it);
    }
  }

  const NodeOptions o_;
  NodePolicy policy_;
  std::shared_ptr<RoundsPerDay> rounds_;  // with [limits] rounds_per_day
  std::string host_;
  int last_ = -1;
  std::string o_version_, o_build_;
  std::map<int, std::unique_ptr<pb::Nodes::Stub>> stubs_;
  std::map<int, std::vector<pb::NodeRefusal>> pending_;
  std::set<int> refused_;
  std::map<int64_t, std::string> seen_;  // each run considered, and the address served ("": refused)
  std::map<int64_t, Served> served_;
  uint64_t generation_ = 0;
  bool warned_unreachable_ = false;
};

}  // namespace

void RunNode(const NodeOptions& options) {
  if (options.insecure == !options.tls_dir.empty()) {
    throw Error("--tls-dir DIR (mutual TLS) or --insecure (plaintext, loopback only): give exactly one");
  }
  if (options.id < 0) throw Error("node: give --id K (or --ids A-B)");
  // SIGTERM and SIGINT stop it: a thread of its own waits for them and
  // cancels the sync in flight.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // Shared with the thread that waits for the signal, which may outlive
  // this call.
  struct Stopping {
    std::atomic<bool> stop{false};
    std::mutex mutex;
    grpc::ClientContext* in_flight = nullptr;
  };
  const auto stopping = std::make_shared<Stopping>();
  std::thread([stopping, stop_signals] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    stopping->stop = true;
    std::lock_guard<std::mutex> lock(stopping->mutex);
    if (stopping->in_flight) stopping->in_flight->TryCancel();
  }).detach();  // the process ends with it waiting, when no signal came
  Node node(options);
  node.set_build(options.version, options.build);
  node.Run(stopping->stop, &stopping->mutex, &stopping->in_flight);
  LogProgress("node: stopping");
}

}  // namespace fedprof::federation
