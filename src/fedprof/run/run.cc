#include "fedprof/run/run.h"

#include "fedprof/core/error.h"
#include "fedprof/run/recorder.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

void RunRounds(RunPlan& plan, const std::string& out_dir, ServerState state, bool resume,
               Transport& transport) {
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
  Server server(plan.rounds, transport, *plan.strategy, *plan.server_models, plan.data.test);
  RunRecorder recorder(plan.config, out_dir, transport.num_clients(),
                       plan.data.test.is_regression(), state, resume);
  const double wall_offset = state.history.empty() ? 0.0 : state.history.back().wall_s;
  server.Run(
      state,
      [&](ServerState& s) {
        s.transport_state = transport.SaveState();
        recorder.OnRound(s, server.LastEvaluations(), plan.strategy->LastScores());
      },
      wall_offset);
  recorder.OnEnd(state, transport.Describe(), plan.num_params);
  transport.Close();
}

}  // namespace fedprof
