#ifndef FEDPROF_TRANSPORT_TRANSPORT_H_
#define FEDPROF_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

class Availability;

// One client as clients.csv describes it, client k at index k.
struct ClientDescription {
  int64_t size = 0;
  std::string kind = "unknown";  // data kind: known in simulation only
  double speed_ghz = 0;          // 0: unknown
  double bandwidth_mhz = 0;
  double round_s = 0;  // a round's time: the cost model's (simulation) or the mean measured
  // The samples of each class it holds: known in simulation only (empty:
  // unknown; beyond report.per_client_limit clients only the first are counted).
  std::vector<int64_t> label_counts;
};

// How the server reaches its clients. The round loop talks only to this
// interface, so it runs the same over in-process clients (simulation),
// ranks of a torch.distributed job and remote machines over gRPC.
class Transport {
 public:
  virtual ~Transport() = default;

  // Client ids are 0 .. num_clients() - 1; not every id need be reachable.
  virtual int num_clients() const = 0;

  // The round loop opens the transport before its first round and closes it
  // after its last, once. Open makes the clients reachable (a deployment
  // waits for enough of them to register, a distributed run for its ranks)
  // and throws fedprof::Error when they do not come; Close tells them the
  // run is over. A transport destroyed unclosed (the run failed) releases
  // its clients as best it can.
  virtual void Open() {}
  virtual void Close() {}

  // What the transport's side keeps between rounds, saved with every
  // checkpoint: simulated clients' local state (FedBN), a deployment's
  // registered sample counts. LoadState, before Open on a resume, restores
  // it and throws fedprof::Error when it does not fit.
  virtual std::string SaveState() { return {}; }
  virtual void LoadState(const std::string& state) { (void)state; }

  // Every client as clients.csv describes it, asked once the rounds are
  // done; by default what Available() tells.
  virtual std::vector<ClientDescription> Describe();

  // The clients that can be selected now, in increasing id order. In
  // simulation every client; in a deployment those registered and alive.
  virtual std::vector<ClientInfo> Available() = 0;

  // Available() once it names at least one client that `wanted` accepts
  // (any client when empty): a deployment whose clients have all left, or
  // whose clients not yet asked this round have, waits for one to come back
  // rather than run rounds with no one (at most deploy.start_timeout_s,
  // then throws fedprof::Error).
  virtual std::vector<ClientInfo> AvailableOrWait(const std::function<bool(int)>& wanted = {}) {
    (void)wanted;
    return Available();
  }

  // The cost model's clock when a round starts (simulation), told before the
  // round's Available: a transport whose clients come and go in virtual time
  // (sim/availability.h) answers for that moment. Others ignore it.
  virtual void SetVirtualTime(double t_s) { (void)t_s; }

  // Where the clients that can be selected change with virtual time alone
  // (a simulation): every client (client k at index k, as Available() names
  // them when all are online; the transport's own list, which outlives the
  // run) and when each is online (null: always), so that an asynchronous
  // run can keep its own index of them (sim/idle_online_index.h) rather than
  // ask Available() at every instant. Null elsewhere: a deployment's clients
  // come and go as they do.
  virtual const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) {
    (void)availability;
    return nullptr;
  }

  // Receives each result of a Fit call exactly once; `index` is the task's
  // position in the list given to Fit. Returns "" when the result is used,
  // else why it was refused; a transport that answers its client
  // (PushReply.accepted) answers with this verdict. Called from any thread,
  // but never from two at once.
  //
  // A relay's results come without their models (FitResult::summed), and so
  // do all of a securely aggregated round's: the models of those accepted
  // come afterwards as one exact partial sum, handed to Sum with the
  // results' indices (or a null sum, with why, when it is lost: its relay
  // gone, the secure session failed). Sum returns "" when the sum is used,
  // else why not, and then those results' models are lost. A sink made of
  // one function takes no sums; a transport that has them needs one that
  // does.
  class ResultSink {
   public:
    using Each = std::function<std::string(size_t index, FitResult&& result)>;
    using Summed = std::function<std::string(const std::vector<size_t>& indices, const ModelSum* sum,
                                             const std::string& lost)>;
    template <typename F, typename = std::enable_if_t<
                              std::is_invocable_r_v<std::string, F&, size_t, FitResult&&>>>
    ResultSink(F each) : each_(std::move(each)) {}  // NOLINT: a function is a sink
    ResultSink(Each each, Summed summed) : each_(std::move(each)), summed_(std::move(summed)) {}

    std::string operator()(size_t index, FitResult&& result) const {
      return each_(index, std::move(result));
    }
    bool TakesSums() const { return static_cast<bool>(summed_); }
    std::string Sum(const std::vector<size_t>& indices, const ModelSum* sum,
                    const std::string& lost = "") const {
      return summed_ ? summed_(indices, sum, lost) : "this round takes no partial sums";
    }

   private:
    Each each_;
    Summed summed_;
  };

  // Sends each client in `tasks` (distinct ids) its own instructions and
  // hands every result to `sink`, in any order, returning once all have
  // been handed over. Instructions of one call share θ (one shared_ptr),
  // which a transport sends once per client and never copies per client. A
  // client that fails, leaves or misses the deadline yields a result with
  // ok == false and a reason (timed_out set for the last two); Fit itself
  // throws only when the transport is broken. Results carry the client id
  // the transport authenticated, whatever the client claimed.
  virtual void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) = 0;

  // Tasks that run as results come (FedBuff in a deployment), where
  // StreamsTasks(): LaunchTasks sends each client in `tasks` (none of them
  // training one already) its instructions and returns; AwaitResult hands
  // `sink` the next launched task's result (index: its client id, results
  // as Fit's) once it comes, or returns false at once when no launched task
  // is open. A simulation has no such order of its own: its asynchronous
  // runs order Fit's results by the cost model's clock (server/buffered.cc).
  virtual bool StreamsTasks() const { return false; }
  virtual void LaunchTasks(const std::vector<ClientInstructions>& tasks);
  virtual bool AwaitResult(const ResultSink& sink);
};

}  // namespace fedprof

#endif  // FEDPROF_TRANSPORT_TRANSPORT_H_
