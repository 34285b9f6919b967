#include "fedprof/run/run.h"

#include <chrono>
#include <optional>

#include "fedprof/client/attack.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/stop_request.h"
#include "fedprof/run/recorder.h"
#include "fedprof/transport/colluding.h"
#include "fedprof/transport/transport.h"

namespace fedprof {
namespace {

// What the observer hears of a run starting after round `round`.
RunStartInfo StartInfo(const Config& config, const std::string& out_dir, int64_t round,
                       const std::vector<ClientDescription>& clients) {
  RunStartInfo info;
  info.run_id = out_dir;
  info.config_digest = config.Fingerprint();
  info.rounds = config.options().rounds;
  info.first_round = round + 1;
  info.num_clients = static_cast<int>(clients.size());
  // Data kinds are known in simulation only.
  for (const ClientDescription& client : clients) {
    if (client.kind != "unknown") {
      for (const ClientDescription& c : clients) info.client_kinds.push_back(c.kind);
      break;
    }
  }
  return info;
}

}  // namespace

void RunRounds(RunPlan& plan, const std::string& out_dir, ServerState state, bool resume, Transport& clients,
               RunObserver* observer) {
  // Colluding attackers craft their models from the round's honest ones on
  // their way to the server, whoever trains them.
  const RunOptions& o = plan.options();
  AttackPlan attacks = MakeAttackPlan(o.attack, o.seed, plan.num_clients());
  std::optional<ColludingTransport> colluding;
  if (attacks.attack.colluding() && o.attack.share > 0) {
    colluding.emplace(clients, std::move(attacks), plan.strategy->aggregator());
  }
  Transport& transport = colluding ? static_cast<Transport&>(*colluding) : clients;
  const std::string checkpoint_path = out_dir + "/checkpoint.bin";
  FlatParams initial = Flatten(*plan.initial_model);
  if (resume && state.global.size() != initial.size()) {
    throw Error(checkpoint_path + ": model has " + std::to_string(state.global.size()) +
                " values, the configured model " + std::to_string(initial.size()));
  }
  if (resume && state.model_sha256 != plan.spec.file_sha256) {
    throw Error("model.file " + plan.spec.file + ": content has SHA-256 " + plan.spec.file_sha256 +
                ", the run in " + out_dir + " was started with " + state.model_sha256 +
                "; restore that file to resume");
  }
  state.model_sha256 = plan.spec.file_sha256;
  if (!resume) state.global = std::move(initial);

  transport.LoadState(state.transport_state);
  transport.Open();
  Server server(plan.rounds, transport, *plan.strategy, *plan.server_models, plan.data.test, observer);
  if (plan.triggered_test.size() > 0) server.EvaluateBackdoorOn(plan.triggered_test);
  RunRecorder recorder(plan.config, out_dir, transport.num_clients(),
                       plan.data.test.is_regression(), state, resume);
  const double wall_offset = state.history.empty() ? 0.0 : state.history.back().wall_s;
  if (observer) observer->BeginRun(StartInfo(plan.config, out_dir, state.round, transport.Describe()));
  // Thrown after a round whose end a stop was asked for (SIGTERM: fedprof
  // server), once its outputs and checkpoint are written.
  struct StoppedAtRoundEnd {};
  bool stopped = false;
  try {
    server.Run(
        state,
        [&](ServerState& s) {
          const auto outputs_start = std::chrono::steady_clock::now();
          s.transport_state = transport.SaveState();
          const std::vector<double> scores = plan.strategy->LastScores();
          recorder.OnRound(s, server.LastEvaluations(), scores);
          if (observer) {
            observer->AddPhase("outputs", std::chrono::duration<double>(
                                              std::chrono::steady_clock::now() - outputs_start)
                                              .count());
            observer->EndRound(s.history.back(), s.times_selected, scores);
          }
          if (StopAtRoundEndRequested() && s.round < o.rounds) throw StoppedAtRoundEnd{};
        },
        wall_offset);
  } catch (const StoppedAtRoundEnd&) {
    stopped = true;
  } catch (const std::exception& e) {
    if (observer) observer->EndRun(e.what());
    throw;
  }
  if (stopped) {
    LogProgress("stopped after round " + std::to_string(state.round) + " of " + std::to_string(o.rounds) +
                ", as asked; its checkpoint holds that round");
  }
  recorder.OnEnd(state, transport.Describe(), plan.num_params);
  if (observer) observer->EndRun("");
  transport.Close();
}

}  // namespace fedprof
