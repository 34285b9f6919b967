#ifndef FEDPROF_CLIENT_REPORTS_H_
#define FEDPROF_CLIENT_REPORTS_H_

// Client::Fit's second step: what θ as received says about the local data,
// for the reports the server asked for (FitInstructions::report).

#include <cstdint>
#include <vector>

#include "fedprof/data/dataset.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

class Model;

// Whether `request` asks for anything computed with θ before training:
// then the model must hold θ as received, whatever training starts from.
bool NeedsReceivedModel(const ReportRequest& request);

// Fills the reports `request` asks for into `result`, with `model` holding θ
// of version `model_version`: the profile of `data` (FedProf, Alg. 2 line
// 15; under secure matching only Enc(q·div) of it, App. C.2), θ's mean loss
// on it (AFL's valuation) and θ's evaluation on it (federated evaluation).
// result->cost.profiling_time_s is the measured time profiling took.
void MakeReports(const ReportRequest& request, int64_t model_version, Model& model,
                 const Dataset& data, FitResult* result);

// Whether `instructions` ask for a profile of θ as received and nothing else
// (FedProf's report pass): such tasks of many clients can share forward
// passes (ProfileTogether).
bool ProfileOnly(const FitInstructions& instructions);

// What Client::Fit returns for profile-only `instructions` to each of
// `clients`, with `model` holding θ, their profiles computed together
// (ComputeProfiles, profiling/profiler.h): the clients' samples, in the
// order given, share forward passes. The wall time is shared out by samples.
std::vector<FitResult> ProfileTogether(const FitInstructions& instructions, Model& model,
                                       const std::vector<const class Client*>& clients);

// The same for clients `ids` whose inputs are rows of shared tables
// (`rows`, one each), their profiles reduced from `shared`'s rows (computed
// with `model` holding θ where not yet): their data is never built.
std::vector<FitResult> ProfileFromTables(const FitInstructions& instructions, Model& model,
                                         class SharedRepresentations& shared,
                                         const std::vector<int>& ids,
                                         const std::vector<const TableRows*>& rows);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_REPORTS_H_
