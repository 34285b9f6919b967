#include "fedprof/client/reports.h"

#include <chrono>
#include <utility>

#include "fedprof/client/client.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/privacy/secure_matching.h"
#include "fedprof/profiling/profiler.h"

namespace fedprof {

bool NeedsReceivedModel(const ReportRequest& request) {
  return request.profile || request.loss || request.evaluate;
}

namespace {

// The profile as the client sends it: under secure matching only
// Enc(q·div) of it leaves the client; the server never sees the profile.
void PutProfile(const ReportRequest& request, Profile profile, FitResult* result) {
  if (request.secure_reference) {
    const PaillierPublicKey key = PaillierPublicKey::Parse(*request.public_key);
    result->encrypted_divergence = EncryptedDivergence(
        key, SecureReference::Parse(*request.secure_reference, key), profile);
  } else {
    result->profile = std::move(profile);
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void MakeReports(const ReportRequest& request, int64_t model_version, Model& model,
                 const Dataset& data, FitResult* result) {
  if (request.profile) {
    const auto profiling = std::chrono::steady_clock::now();
    PutProfile(request, ComputeProfile(model, data, model_version), result);
    result->cost.profiling_time_s = SecondsSince(profiling);
  }
  if (request.loss || request.evaluate) {
    ModelReplicas single(model);
    const EvalResult e = Evaluate(single, data);
    if (request.loss) result->pre_train_loss = e.loss;
    if (request.evaluate) {
      result->eval_samples = e.samples;
      result->eval_correct = e.correct;
      result->eval_loss = e.loss;
    }
  }
}

bool ProfileOnly(const FitInstructions& ins) {
  return ins.report.profile && !ins.report.loss && !ins.report.evaluate &&
         ins.report.sketch_dim == 0 && ins.train.epochs == 0 &&
         !ins.objective.keep_local_batch_norm;
}

std::vector<FitResult> ProfileTogether(const FitInstructions& ins, Model& model,
                                       const std::vector<const Client*>& clients) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const Dataset*> data;
  int64_t samples = 0;
  for (const Client* c : clients) {
    data.push_back(&c->data());
    samples += c->num_samples();
  }
  std::vector<Profile> profiles = ComputeProfiles(model, data, ins.model_version);
  std::vector<FitResult> results(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    FitResult& r = results[i];
    r.client_id = clients[i]->id();
    r.num_samples = clients[i]->num_samples();
    PutProfile(ins.report, std::move(profiles[i]), &r);
    r.ok = true;
  }
  const double seconds = SecondsSince(start);
  for (FitResult& r : results) {
    r.cost.time_s = r.cost.profiling_time_s =
        samples > 0 ? seconds * static_cast<double>(r.num_samples) / static_cast<double>(samples)
                    : 0.0;
  }
  return results;
}

}  // namespace fedprof
