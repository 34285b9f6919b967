// The server's asynchronous loop (Server::RunBuffered): FedBuff's clients,
// events and buffer, in the cost model's virtual time in simulation and in
// the order results arrive in a deployment (Transport::StreamsTasks).

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "fedprof/aggregation/fedbuff.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/text.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/idle_online_index.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {

class Server::BufferedRun {
 public:
  BufferedRun(Server& server, ServerState& state)
      : server_(server),
        state_(state),
        options_(*server.strategy_.Buffered()),
        streams_(server.transport_.StreamsTasks()),
        began_(std::chrono::steady_clock::now()),
        began_s_(state.virtual_time_s),
        busy_(static_cast<size_t>(server.transport_.num_clients()), 0),
        expected_s_(busy_.size(), 0.0) {
    models_[state.round] = std::make_shared<const FlatParams>(state.global);
    for (auto& [version, model] : state.training_models) {
      models_[version] = std::make_shared<const FlatParams>(std::move(model));
    }
    state.training_models.clear();
    for (const auto& [version, model] : models_) {
      if (version < state.round) server.strategy_.OnEarlierModel(*model, version);
    }
    Availability* availability = nullptr;
    const std::vector<ClientInfo>* population =
        streams_ ? nullptr : server.transport_.VirtualPopulation(&availability);
    if (population) {
      for (const ClientInfo& c : *population) expected_s_.at(c.id) = std::max(0.0, c.expected_time_s);
      index_ = std::make_unique<IdleOnlineIndex>(*population, availability);
    }
    Restart();
  }

  // Steps until the run has options.rounds of them. The state's instant
  // (its virtual time) may still have arrivals due; its dispatch follows them.
  void Run(const std::function<void(ServerState&)>& on_round, double wall_offset_s) {
    double now = state_.virtual_time_s;
    double last_step_s = now;
    auto phase = std::make_unique<PhaseTimer>(server_.observer_, "train");
    while (state_.round < server_.options_.rounds) {
      if (streams_) {
        now = Elapsed();
        if (options_.refill == FedBuffOptions::Refill::kOnArrival || stepped_ || flights_.empty()) {
          Dispatch(now);
          stepped_ = false;
        }
        if (flights_.empty()) throw NoOneToTrain(now);
        AwaitArrival();
        now = Elapsed();
      } else if (flights_.empty() || flights_.begin()->first.first > now) {
        // The instant is over: its free places refill (under refill = step,
        // only if the server stepped since the last refill, or no one trains).
        if (options_.refill == FedBuffOptions::Refill::kOnArrival || stepped_ || flights_.empty()) {
          Dispatch(now);
          stepped_ = false;
        }
        if (flights_.empty()) throw NoOneToTrain(now);
        now = flights_.begin()->first.first;
      }
      if (!streams_) {
        Arrive(flights_.begin()->second);
        flights_.erase(flights_.begin());
      }
      if (static_cast<int>(buffer_.size()) < options_.buffer) continue;

      phase->Next("aggregate");
      RoundMetrics m = Step(now - last_step_s, now);
      last_step_s = now;
      stepped_ = true;
      phase->Next("evaluate");
      server_.EvaluateRound(m.round, state_.global, &m);
      m.wall_s =
          wall_offset_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
      phase->Stop();
      Keep();
      state_.history.push_back(m);
      if (server_.options_.progress) server_.LogRound(m);
      if (on_round) on_round(state_);
      phase = std::make_unique<PhaseTimer>(server_.observer_, "train");
    }
    phase->Stop();
  }

 private:
  // A client in training: its task, and (in simulation) its result, made
  // when it started (a task's result depends on its instructions alone).
  struct Flight {
    TrainingTask task;
    FitResult result;
  };
  // The event order: when a client finishes, then its id (in a deployment,
  // when it started: results come in their own order).
  using EventKey = std::pair<double, int>;

  // What the results since the last step came to.
  struct Tally {
    int selected = 0, returned = 0, refused = 0, timed_out = 0;
    ExactSum train_loss, staleness, energy_j, profiling_energy_j;
  };

  TaskSetup SetupFor(int64_t version, int64_t dispatch) const {
    TaskSetup setup;
    setup.round = dispatch;
    setup.global = models_.at(version);
    setup.model_version = version;
    setup.train = server_.options_.train;
    setup.train.lr = server_.LearningRate(version + 1);
    setup.seed = server_.options_.seed;
    return setup;
  }

  // Trains `tasks` (started at virtual time `now`) and queues each by when it
  // finishes; a client that fails or is lost is noticed when it would have
  // finished. A deployment's tasks are sent, their results awaited.
  void Start(const std::vector<ClientInstructions>& tasks, const std::vector<TrainingTask>& records,
             double now) {
    if (streams_) {
      server_.transport_.LaunchTasks(tasks);
      for (const TrainingTask& t : records) {
        SetBusy(t.client_id, true);
        flights_.emplace(EventKey{now, t.client_id}, Flight{t, FitResult()});
      }
      return;
    }
    std::vector<FitResult> results(tasks.size());
    server_.transport_.Fit(tasks, [&](size_t i, FitResult&& r) {
      results.at(i) = std::move(r);
      return std::string();
    });
    for (size_t i = 0; i < tasks.size(); ++i) {
      FitResult& r = results[i];
      const int id = records[i].client_id;
      r.client_id = id;
      const double finish = now + (r.ok ? std::max(0.0, r.cost.time_s) : expected_s_.at(id));
      SetBusy(id, true);
      flights_.emplace(EventKey{finish, id}, Flight{records[i], std::move(r)});
    }
  }

  void SetBusy(int id, bool busy) {
    busy_.at(id) = busy ? 1 : 0;
    if (index_) index_->SetBusy(id, busy);
  }

  // The transport's clock (and the index, if any) at virtual time `now`.
  void MoveTo(double now) {
    server_.transport_.SetVirtualTime(now);
    if (index_) index_->AdvanceTo(now);
  }

  // The clients online at `now`, their expected times noted (the
  // transport's answer; a simulation's index answers without it).
  std::vector<ClientInfo> Online(double now) {
    server_.transport_.SetVirtualTime(now);
    std::vector<ClientInfo> online = server_.transport_.AvailableOrWait();
    for (const ClientInfo& c : online) expected_s_.at(c.id) = std::max(0.0, c.expected_time_s);
    return online;
  }

  // A resumed run's clients in training, trained again as they started.
  void Restart() {
    std::map<double, std::vector<TrainingTask>> by_start;
    for (const TrainingTask& t : state_.training) {
      if (t.client_id >= static_cast<int>(busy_.size()) || busy_.at(t.client_id) != 0) {
        throw Error("checkpoint: client " + std::to_string(t.client_id) + " in training is not one of the " +
                    std::to_string(busy_.size()) + " clients, or is there twice");
      }
      SetBusy(t.client_id, true);
      by_start[t.start_s].push_back(t);
    }
    state_.training.clear();
    for (const auto& [start_s, records] : by_start) {
      if (index_) {
        MoveTo(start_s);  // the starts come in order, none after the checkpoint's instant
      } else {
        Online(start_s);
      }
      std::vector<ClientInstructions> tasks;
      for (const TrainingTask& t : records) {
        tasks.push_back({t.client_id, server_.strategy_.TrainingInstructions(
                                          t.client_id, SetupFor(t.version, t.dispatch))});
      }
      Start(tasks, records, start_s);
    }
  }

  // Fills the free places at virtual time `now` with clients the selector
  // picks among the idle online ones.
  void Dispatch(double now) {
    const int free = options_.concurrency - static_cast<int>(flights_.size());
    if (free <= 0) return;
    const bool reports = server_.strategy_.WantedReports().any();
    // A selector that draws by rank draws from the index; others get its list.
    const bool by_rank = index_ && !reports && server_.strategy_.DrawsByRank();
    std::vector<ClientInfo> idle;
    if (index_) {
      MoveTo(now);
      if (!by_rank) idle = index_->Idle();
    } else {
      idle = Online(now);
      idle.erase(
          std::remove_if(idle.begin(), idle.end(), [&](const ClientInfo& c) { return busy_.at(c.id) != 0; }),
          idle.end());
    }
    if (reports) server_.CollectReports(idle, state_.global, state_.round);
    const int k = std::min(free, by_rank ? index_->size() : static_cast<int>(idle.size()));
    if (k == 0) return;
    const int64_t dispatch = ++state_.dispatches;
    // The selector's round is the step the clients train for (Oort's
    // exploration and pacer count steps); the draws are the dispatch's own.
    SelectionContext context{state_.round + 1, k, by_rank ? nullptr : &idle,
                             by_rank ? index_.get() : nullptr};
    Rng rng = MakeRng(server_.options_.seed, Stream::kSelection, {static_cast<uint64_t>(dispatch)});
    const std::vector<ClientInstructions> tasks =
        server_.strategy_.ConfigureFit(context, rng, SetupFor(state_.round, dispatch));
    std::vector<TrainingTask> records;
    for (const ClientInstructions& c : tasks) {
      ++state_.times_selected.at(c.client_id);
      records.push_back({c.client_id, state_.round, dispatch, now});
    }
    tally_.selected += static_cast<int>(tasks.size());
    Start(tasks, records, now);
  }

  Error NoOneToTrain(double now) const {
    return Error("fedbuff: at " + std::string(streams_ ? "" : "virtual ") + "time " + FormatDouble(now) +
                 " s no client is training and none is online to start (" + std::to_string(held_.size()) +
                 " whose results were refused wait for the next step); the checkpoint holds step " +
                 std::to_string(state_.round));
  }

  // A deployment's next result arrives (its client's verdict is Arrive's).
  void AwaitArrival() {
    const bool came = server_.transport_.AwaitResult([this](size_t id, FitResult&& r) {
      const auto it = std::find_if(flights_.begin(), flights_.end(), [id](const auto& f) {
        return f.second.task.client_id == static_cast<int>(id);
      });
      if (it == flights_.end()) {
        throw Error("fedbuff: a result for client " + std::to_string(id) + ", which trains no task");
      }
      Flight f = std::move(it->second);
      flights_.erase(it);
      f.result = std::move(r);
      return Arrive(f);
    });
    if (!came) {
      throw Error("fedbuff: " + std::to_string(flights_.size()) +
                  " clients in training, but the transport awaits no result; the checkpoint holds step " +
                  std::to_string(state_.round));
    }
  }

  // Seconds since the run began (a resumed run: since it first began, as the
  // checkpoint counted them): a deployment's clock.
  double Elapsed() const {
    return began_s_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
  }

  // A result arrives: checked as the synchronous round checks it (its update
  // against the model it started from), then buffered. Returns why it was
  // refused, or "".
  std::string Arrive(Flight& f) {
    FitResult& r = f.result;
    SetBusy(f.task.client_id, false);
    tally_.energy_j.Add(r.cost.energy_j);
    tally_.profiling_energy_j.Add(r.cost.profiling_energy_j);
    const std::shared_ptr<const FlatParams>& start = models_.at(f.task.version);
    const std::string why = server_.CheckTrained(&r, *start, f.task.version);
    if (RunObserver* observer = server_.observer_) {
      observer->AddResult(r.client_id, why.empty(), r.timed_out, why, r.cost.time_s);
    }
    if (!why.empty()) {
      ++(r.timed_out ? tally_.timed_out : tally_.refused);
      if (!r.timed_out) {
        // Not picked again before the next step: a client that sends what
        // is refused would otherwise take every freed place.
        SetBusy(f.task.client_id, true);
        held_.push_back(f.task.client_id);
      }
      LogWarning("step " + std::to_string(state_.round + 1) + ": client " + std::to_string(r.client_id) +
                 (r.timed_out ? " timed out: " : " refused: ") + why);
      return why;
    }
    ++tally_.returned;
    server_.strategy_.Observe(r);
    tally_.train_loss.Add(r.train_loss);
    const int64_t staleness = state_.round - f.task.version;
    tally_.staleness.Add(static_cast<double>(staleness));
    buffer_.push_back({r.client_id, r.num_samples, staleness, std::move(r.params), start});
    return "";
  }

  // The server's step at virtual time `now`, `elapsed_s` after the last.
  RoundMetrics Step(double elapsed_s, double now) {
    int64_t total_samples = 0;  // |D| of the clients online
    int online = 0;
    if (index_) {
      MoveTo(now);
      online = index_->online();
      total_samples = index_->online_samples();
    } else {
      const std::vector<ClientInfo> clients = Online(now);
      online = static_cast<int>(clients.size());
      for (const ClientInfo& c : clients) total_samples += c.num_samples;
    }
    RoundMetrics m;
    m.round = state_.round + 1;
    m.lr = server_.LearningRate(m.round);
    m.selected = tally_.selected;
    m.returned = tally_.returned;
    m.refused = tally_.refused;
    m.timed_out = tally_.timed_out;
    m.online = online;
    m.train_loss = tally_.train_loss.value() / tally_.returned;
    m.staleness = tally_.staleness.value() / tally_.returned;
    FlatParams next;
    server_.strategy_.AggregateBuffer(state_.global, buffer_, total_samples, &next);
    state_.global = std::move(next);
    state_.round = m.round;
    models_[state_.round] = std::make_shared<const FlatParams>(state_.global);
    server_.strategy_.OnGlobalModel(state_.global, state_.round);
    state_.strategy_state = server_.strategy_.SaveState();
    m.round_time_s = elapsed_s;
    m.round_energy_wh = tally_.energy_j.value() / 3600.0;
    m.profiling_energy_wh = tally_.profiling_energy_j.value() / 3600.0;
    state_.virtual_time_s = now;
    state_.energy_j += tally_.energy_j.value();
    m.virtual_time_s = now;
    m.energy_wh = state_.energy_j / 3600.0;
    buffer_.clear();
    tally_ = Tally();
    for (int id : held_) SetBusy(id, false);
    held_.clear();
    return m;
  }

  // The checkpoint's view of the clients in training; the models no one
  // trains on any more are dropped.
  void Keep() {
    std::map<int64_t, std::shared_ptr<const FlatParams>> used;
    used[state_.round] = models_.at(state_.round);
    state_.training.clear();
    state_.training_models.clear();
    for (const auto& [key, flight] : flights_) {
      state_.training.push_back(flight.task);
      const int64_t v = flight.task.version;
      used[v] = models_.at(v);
      if (v < state_.round && state_.training_models.count(v) == 0) state_.training_models[v] = *used[v];
    }
    models_ = std::move(used);
  }

  Server& server_;
  ServerState& state_;
  const FedBuffOptions& options_;
  const bool streams_;  // a deployment: results in the order they arrive
  const std::chrono::steady_clock::time_point began_;
  const double began_s_;  // the state's virtual time when this run began
  std::map<int64_t, std::shared_ptr<const FlatParams>> models_;  // by version
  std::map<EventKey, Flight> flights_;
  std::vector<char> busy_;          // by client id: training, or held
  std::unique_ptr<IdleOnlineIndex> index_;  // a simulation's idle online clients (null: ask the transport)
  std::vector<int> held_;           // refused since the last step
  std::vector<double> expected_s_;  // a task's expected time, by client id
  std::vector<BufferedUpdate> buffer_;
  Tally tally_;
  // Whether the server stepped since the last refill: every checkpoint is
  // taken at a step, so a run starts (or resumes) with a refill due.
  bool stepped_ = true;
};

void Server::RunBuffered(ServerState& state, const std::function<void(ServerState&)>& on_round,
                         double wall_offset_s) {
  Resume(state);
  BufferedRun(*this, state).Run(on_round, wall_offset_s);
}

}  // namespace fedprof
