#include "fedprof/client/reports.h"

#include <chrono>

#include "fedprof/client/client.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/privacy/secure_matching.h"
#include "fedprof/profiling/profiler.h"

namespace fedprof {

bool NeedsReceivedModel(const ReportRequest& request) {
  return request.profile || request.loss || request.evaluate;
}

void MakeReports(const ReportRequest& request, int64_t model_version, Model& model,
                 const Dataset& data, FitResult* result) {
  if (request.profile) {
    const auto profiling = std::chrono::steady_clock::now();
    result->profile = ComputeProfile(model, data, model_version);
    if (request.secure_reference) {
      // Only Enc(q·div) leaves the client; the server never sees the profile.
      const PaillierPublicKey key = PaillierPublicKey::Parse(*request.public_key);
      result->encrypted_divergence = EncryptedDivergence(
          key, SecureReference::Parse(*request.secure_reference, key), *result->profile);
      result->profile.reset();
    }
    result->cost.profiling_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - profiling).count();
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

}  // namespace fedprof
