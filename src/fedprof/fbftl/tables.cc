// The Markdown and CSV tables of a run of the transfer schemes.
#include <algorithm>

#include "fedprof/core/text.h"
#include "fedprof/fbftl/schemes.h"

namespace fedprof {
namespace {

// The accuracy every scheme's uplink is measured to: the lower of FTL_c's
// and FbFTL's final accuracies (the level both reach; the paper's claim is
// that FbFTL matches FTL_c), or whichever of them ran.
double ReferenceAccuracy(const std::vector<SchemeRun>& runs) {
  double target = -1;
  for (const SchemeRun& r : runs) {
    if (r.scheme == "FTL_c" || r.scheme == "FbFTL") {
      target = target < 0 ? r.accuracy : std::min(target, r.accuracy);
    }
  }
  return target;
}

// Uplink bytes when the run first reached `target`; -1 if it never did.
int64_t UplinkToReach(const SchemeRun& run, double target) {
  if (target < 0) return -1;
  if (run.scheme == "FbFTL") return run.accuracy >= target ? run.uplink_bytes : -1;
  for (const CurvePoint& p : run.curve) {
    if (p.test_accuracy >= target) return p.uplink_bytes;
  }
  return -1;
}

std::string Sci(double v) { return FormatDouble(v, "%.4g"); }

// FbFTL's uplink bytes, the denominator of every ratio; 0 when FbFTL did not run.
int64_t FbftlUplink(const std::vector<SchemeRun>& runs) {
  for (const SchemeRun& r : runs) {
    if (r.scheme == "FbFTL") return r.uplink_bytes;
  }
  return 0;
}

std::string Ratio(double bytes, int64_t fbftl) {
  return fbftl > 0 ? Sci(bytes / static_cast<double>(fbftl)) : "—";
}

}  // namespace

std::string SchemesMarkdown(const std::vector<SchemeRun>& runs) {
  const double target = ReferenceAccuracy(runs);
  const int64_t fbftl = FbftlUplink(runs);
  std::string out =
      "| scheme | upload batches | values / batch | uplink bytes | uplink, Eqs. 2-6 (bytes) | "
      "downlink bytes | downlink, Eqs. 10-13 (bytes) | client compute X | accuracy | epsilon | "
      "uplink ÷ FbFTL's | uplink to reach " +
      (target >= 0 ? FormatDouble(target, "%.4f") : std::string("(no FTL_c or FbFTL run)")) +
      " (bytes) | ÷ FbFTL's |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SchemeRun& r : runs) {
    const int64_t reach = UplinkToReach(r, target);
    const auto uplink = static_cast<double>(r.uplink_bytes);
    // A run that never reached the target needed more than it sent.
    const bool never = reach < 0 && target >= 0;
    const std::string reach_text = reach >= 0 ? Sci(static_cast<double>(reach))
                                   : never    ? "> " + Sci(uplink)
                                              : "—";
    const std::string reach_ratio = reach >= 0           ? Ratio(static_cast<double>(reach), fbftl)
                                    : never && fbftl > 0 ? "> " + Ratio(uplink, fbftl)
                                                         : "—";
    out += "| " + r.scheme + " | " + std::to_string(r.upload_batches) + " | " +
           Sci(r.closed_form.params_per_batch) + " | " + Sci(uplink) + " | " +
           Sci(r.closed_form.uplink_bits / 8) + " | " + Sci(static_cast<double>(r.downlink_bytes)) +
           " | " + Sci(r.closed_form.downlink_bits / 8) + " | " + Sci(r.client_macs) + " | " +
           FormatDouble(r.accuracy, "%.4f") + " | " +
           (r.epsilon > 0 ? FormatDouble(r.epsilon, "%.3g") : "—") + " | " + Ratio(uplink, fbftl) +
           " | " + reach_text + " | " + reach_ratio + " |\n";
  }
  return out;
}

std::string SchemesCsv(const std::vector<SchemeRun>& runs) {
  const double target = ReferenceAccuracy(runs);
  std::string out =
      "scheme,upload_batches,transmissions,lost_uploads,rejected_uploads,uplink_bytes,"
      "uplink_value_bits,closed_form_uplink_bits,downlink_bytes,downlink_value_bits,"
      "closed_form_downlink_bits,client_macs,closed_form_client_macs,accuracy,epsilon,"
      "uplink_bytes_to_reference_accuracy,reference_accuracy\n";
  for (const SchemeRun& r : runs) {
    out += r.scheme + "," + std::to_string(r.upload_batches) + "," +
           std::to_string(r.transmissions) + "," + std::to_string(r.lost_uploads) + "," +
           std::to_string(r.rejected_uploads) + "," + std::to_string(r.uplink_bytes) + "," +
           std::to_string(r.uplink_value_bits) + "," +
           FormatDouble(r.closed_form.uplink_bits, "%.17g") + "," +
           std::to_string(r.downlink_bytes) + "," + std::to_string(r.downlink_value_bits) + "," +
           FormatDouble(r.closed_form.downlink_bits, "%.17g") + "," +
           FormatDouble(r.client_macs, "%.17g") + "," +
           FormatDouble(r.closed_form.client_macs, "%.17g") + "," +
           FormatDouble(r.accuracy, "%.6f") + "," + FormatDouble(r.epsilon, "%.6g") + "," +
           std::to_string(UplinkToReach(r, target)) + "," + FormatDouble(target, "%.6f") + "\n";
  }
  return out;
}

std::string CurvesCsv(const std::vector<SchemeRun>& runs) {
  std::string out = "scheme,epoch,uplink_bytes,test_accuracy\n";
  for (const SchemeRun& r : runs) {
    for (const CurvePoint& p : r.curve) {
      out += r.scheme + "," + std::to_string(p.epoch) + "," + std::to_string(p.uplink_bytes) + "," +
             FormatDouble(p.test_accuracy, "%.6f") + "\n";
    }
  }
  return out;
}

}  // namespace fedprof
