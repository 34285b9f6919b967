// Profile JSON as `fedprof divergence` reads it (profiling/profile.h).
// Input: the client profile, optionally "\n\0\n" and the reference profile
// (else the client profile is its own reference). Two profiles that pass
// CheckProfile must give a divergence that is not NaN and a score in [0, 1].

#include <cmath>

#include "fedprof/profiling/profile.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  const auto parts = fuzz::SplitAt(fuzz::Bytes(data, size), std::string("\n\0\n", 3));
  const std::string& client_text = parts.first;
  const std::string& reference_text = parts.second;
  return fuzz::Run([&] {
    const Profile p = ProfileFromJson(client_text, "client.json");
    const Profile r =
        reference_text.empty() ? p : ProfileFromJson(reference_text, "reference.json");
    if (!CheckProfile(r, r).empty() || !CheckProfile(p, r).empty()) return;
    for (double kl : UnitKl(p, r)) FUZZ_CHECK(!std::isnan(kl), "NaN unit KL");
    const double div = Divergence(p, r);
    FUZZ_CHECK(!std::isnan(div), "NaN divergence");
    const double score = Score(div, 10);
    FUZZ_CHECK(score >= 0 && score <= 1, "score outside [0, 1]");
    // What the profile command writes reads back the same.
    const Profile back = ProfileFromJson(ProfileToJson(p), "written.json");
    FUZZ_CHECK(back.mean == p.mean && back.var == p.var && back.layer == p.layer &&
                   back.version == p.version,
               "ProfileToJson did not round-trip");
  });
}
