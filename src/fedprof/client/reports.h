#ifndef FEDPROF_CLIENT_REPORTS_H_
#define FEDPROF_CLIENT_REPORTS_H_

// Client::Fit's second step: what θ as received says about the local data,
// for the reports the server asked for (FitInstructions::report).

#include <cstdint>

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

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_REPORTS_H_
