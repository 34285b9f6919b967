#ifndef FEDPROF_FBFTL_SCHEMES_H_
#define FEDPROF_FBFTL_SCHEMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/data/dataset.h"
#include "fedprof/fbftl/payload.h"

namespace fedprof {

class StagedModel;

// One point of a scheme's learning curve: after `epoch` epochs (FbFTL: head
// epochs on the server), the uplink bytes sent so far and the test accuracy.
struct CurvePoint {
  int epoch = 0;
  int64_t uplink_bytes = 0;
  double test_accuracy = 0;
};

// What one transfer scheme did in a run. Counts are of what was actually
// serialised: uploads include retransmissions; a broadcast download counts
// once per iteration, as in Eqs. 10-13.
struct SchemeRun {
  std::string scheme;
  int64_t upload_batches = 0;       // client uploads (FbFTL: samples), first sends only
  int64_t transmissions = 0;        // packets sent, retransmissions included
  int64_t lost_uploads = 0;         // uploads lost after every retransmission
  int64_t rejected_uploads = 0;     // uploads the server refused (malformed, non-finite)
  int64_t uplink_bytes = 0;         // serialised messages, every transmission
  int64_t uplink_value_bits = 0;    // of which values (the closed forms' d·count)
  int64_t downlink_bytes = 0;
  int64_t downlink_value_bits = 0;
  double client_macs = 0;           // multiplications on clients, counted per sample and stage
  double accuracy = 0;              // test accuracy of the final model (FbFTL: best validation)
  double epsilon = 0;               // (ε, δ) of the uploads' Gaussian noise; 0 without noise
  std::vector<CurvePoint> curve;
  SchemePayload closed_form;        // Eqs. 2-17 for this run's U, K_u, C and epochs
};

// Runs the schemes `options` name (transfer.schemes) on the clients' share of `train`
// (transfer.clients × transfer.samples_per_client samples, drawn by `seed`, the run's)
// and reports test accuracy on `test`: the gradient schemes in
// gradient_schemes.cc, FbFTL in fbftl_scheme.cc, every upload over
// channel.h's lossy uplink. The source model is not modified.
// Throws fedprof::Error for an unknown scheme, a cut layer the source lacks,
// too few training samples, or a source whose output does not fit the data.
std::vector<SchemeRun> RunTransferSchemes(const RunOptions::Transfer& options, uint64_t seed,
                                          const StagedModel& source, const Dataset& train,
                                          const Dataset& test);

// The runs as a Markdown table like the FbFTL paper's Table III: measured
// upload batches, serialised uplink and downlink bytes next to the closed
// forms, client compute, accuracy, ε, the uplink as a multiple of FbFTL's,
// and the uplink each scheme had sent when it first reached the lower of
// FTL_c's and FbFTL's final accuracies (for a scheme that never did, "> " its
// whole uplink), also as a multiple of FbFTL's.
std::string SchemesMarkdown(const std::vector<SchemeRun>& runs);
// The same numbers as CSV, one row per scheme.
std::string SchemesCsv(const std::vector<SchemeRun>& runs);
// scheme,epoch,uplink_bytes,test_accuracy for every curve point.
std::string CurvesCsv(const std::vector<SchemeRun>& runs);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_SCHEMES_H_
