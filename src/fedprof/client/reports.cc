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

namespace {

// The results of profile-only tasks for clients `ids` (of `sizes` samples),
// their `profiles` computed together since `start`: the wall time is shared
// out by samples.
std::vector<FitResult> TogetherResults(const FitInstructions& ins, const std::vector<int>& ids,
                                       const std::vector<int64_t>& sizes,
                                       std::vector<Profile> profiles,
                                       std::chrono::steady_clock::time_point start) {
  std::vector<FitResult> results(ids.size());
  int64_t samples = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    FitResult& r = results[i];
    r.client_id = ids[i];
    r.num_samples = sizes[i];
    PutProfile(ins.report, std::move(profiles[i]), &r);
    r.ok = true;
    samples += sizes[i];
  }
  const double seconds = SecondsSince(start);
  for (FitResult& r : results) {
    r.cost.time_s = r.cost.profiling_time_s =
        samples > 0 ? seconds * static_cast<double>(r.num_samples) / static_cast<double>(samples)
                    : 0.0;
  }
  return results;
}

}  // namespace

std::vector<FitResult> ProfileTogether(const FitInstructions& ins, Model& model,
                                       const std::vector<const Client*>& clients) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const Dataset*> data;
  std::vector<int> ids;
  std::vector<int64_t> sizes;
  for (const Client* c : clients) {
    data.push_back(&c->data());
    ids.push_back(c->id());
    sizes.push_back(c->num_samples());
  }
  return TogetherResults(ins, ids, sizes, ComputeProfiles(model, data, ins.model_version), start);
}

std::vector<FitResult> ProfileFromTables(const FitInstructions& ins, Model& model,
                                         SharedRepresentations& shared,
                                         const std::vector<int>& ids,
                                         const std::vector<const TableRows*>& rows) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> sizes;
  for (const TableRows* r : rows) sizes.push_back(static_cast<int64_t>(r->rows.size()));
  std::vector<Profile> profiles = ProfilesFromRows(shared.Gather(model, rows), sizes,
                                                   ins.model_version, model.profiled_layer());
  return TogetherResults(ins, ids, sizes, std::move(profiles), start);
}

}  // namespace fedprof
