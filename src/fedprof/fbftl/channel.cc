#include "fedprof/fbftl/channel.h"

#include "fedprof/fbftl/compression.h"
#include "fedprof/fbftl/scheme_runner.h"
#include "fedprof/fbftl/schemes.h"
#include "transfer.pb.h"

namespace fedprof {

Uplink::Uplink(const SchemeSetup& setup, uint64_t scheme_id)
    : setup_(setup), rng_(MakeRng(setup.seed, Stream::kNoise, {scheme_id, 1})) {}

bool Uplink::Send(int64_t bytes, int64_t value_bits, SchemeRun* run) {
  for (int n = 0; n <= setup_.options.retransmissions; ++n) {
    ++run->transmissions;
    run->uplink_bytes += bytes;
    run->uplink_value_bits += value_bits;
    if (setup_.packet_loss == 0 || Uniform01(rng_) >= setup_.packet_loss) return true;
  }
  ++run->lost_uploads;
  return false;
}

void CountDownload(const wire::Download& download, SchemeRun* run) {
  run->downlink_bytes += static_cast<int64_t>(download.ByteSizeLong());
  run->downlink_value_bits += WireValueBits(download.values());
}

}  // namespace fedprof
