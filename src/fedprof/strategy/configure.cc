// The strategy's instructions to clients: who trains, reports or evaluates,
// and what each of them is told (Strategy::ConfigureFit and friends).

#include <utility>

#include "fedprof/strategy/strategy.h"

namespace fedprof {

FitInstructions Strategy::InstructionsFor(int client_id, const TaskSetup& setup) const {
  FitInstructions ins;
  ins.round = setup.round;
  ins.global = setup.global;  // shared, never copied per client
  ins.model_version = setup.model_version;
  ins.train = setup.train;
  ins.seed = setup.seed;
  const Reports reports = selector_->WantedReports();
  ins.report.profile = reports.profile;
  ins.report.loss = reports.loss;
  selector_->ConfigureReport(client_id, &ins.report);
  return ins;
}

FitInstructions Strategy::TrainingInstructions(int client_id, const TaskSetup& setup) const {
  FitInstructions ins = InstructionsFor(client_id, setup);
  ins.report.sketch_dim = selector_->SketchDim();
  ins.report.train_loss = selector_->NeedsTrainingLoss();
  ins.objective = algorithm_objective_;
  ins.objective.prox_mu = proximal_mu_;
  ins.objective.keep_local_batch_norm = local_batch_norm_;
  if (algorithm_) ins.algorithm_values = algorithm_->Broadcast();
  if (dp_) ins.clip_norm = dp_->ClipNorm();
  if (dp_ && dp_->options().distributed) ins.ddg = dp_->RoundEncoding(setup.round);
  return ins;
}

std::vector<ClientInstructions> Strategy::ConfigureFit(const SelectionContext& context, Rng& rng,
                                                       const TaskSetup& setup) {
  const std::vector<int> selected = selector_->Select(context, rng);
  // Under distributed DP the encoding depends on how many the session invites.
  if (dp_) dp_->Invite(static_cast<int64_t>(selected.size()));
  std::vector<ClientInstructions> out;
  for (int id : selected) out.push_back({id, TrainingInstructions(id, setup)});
  return out;
}

std::vector<ClientInstructions> Strategy::ConfigureReports(const std::vector<int>& client_ids,
                                                           const TaskSetup& setup) const {
  std::vector<ClientInstructions> out;
  out.reserve(client_ids.size());
  for (int id : client_ids) {
    FitInstructions ins = InstructionsFor(id, setup);
    ins.train.epochs = 0;
    out.push_back({id, std::move(ins)});
  }
  return out;
}

std::vector<ClientInstructions> Strategy::ConfigureEvaluate(const SelectionContext& context,
                                                            Rng& rng,
                                                            const TaskSetup& setup) const {
  std::vector<ClientInstructions> out;
  for (int id : selector_->SelectEvaluators(context, rng)) {
    FitInstructions ins;
    ins.round = setup.round;
    ins.global = setup.global;
    ins.model_version = setup.model_version;
    ins.report.evaluate = true;
    ins.train = setup.train;
    ins.train.epochs = 0;
    ins.seed = setup.seed;
    out.push_back({id, std::move(ins)});
  }
  return out;
}

}  // namespace fedprof
