#ifndef FEDPROF_FBFTL_CHANNEL_H_
#define FEDPROF_FBFTL_CHANNEL_H_

#include <cstdint>

#include "fedprof/core/rng.h"

namespace fedprof {

namespace wire {
class Download;
}
struct SchemeRun;
struct SchemeSetup;

// The uplink of one scheme's run: every packet is lost with probability PLR
// (Eq. 18, SchemeSetup::packet_loss) per transmission and sent again up to
// n_r times (transfer.retransmissions, Eq. 19); each transmission's bytes
// count. Losses draw from a stream keyed by the seed and the scheme, so they
// do not depend on what other schemes sent. Holds a reference to `setup`.
class Uplink {
 public:
  Uplink(const SchemeSetup& setup, uint64_t scheme_id);

  // Sends a packet of `bytes` bytes, `value_bits` of them values, counting
  // every transmission in `run`; true when it arrives, false (counted as a
  // lost upload) when every transmission was lost.
  bool Send(int64_t bytes, int64_t value_bits, SchemeRun* run);

 private:
  const SchemeSetup& setup_;
  Rng rng_;
};

// Counts a download (lossless, broadcast once) in `run`.
void CountDownload(const wire::Download& download, SchemeRun* run);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_CHANNEL_H_
