// Checkpoint files (server/checkpoint.h). Input: one flag byte, then the
// file. Flag bit 0 set: the file is "sealed" first, its correct SHA-256
// appended, so that the fuzzer reaches the header and model parsing behind
// the checksum; clear: the bytes are the whole file (the checksum must catch
// what they change). A decoded checkpoint must encode back to the same file.

#include "fedprof/core/hash.h"
#include "fedprof/server/checkpoint.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fedprof;
  if (size < 1) return 0;
  std::string file = fuzz::Bytes(data + 1, size - 1);
  if (data[0] & 1) {
    const Sha256Digest sum = Sha256(file);
    file.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  }
  return fuzz::Run([&] {
    const DecodedCheckpoint c = DecodeCheckpoint(file, "checkpoint.bin");
    FUZZ_CHECK(static_cast<int64_t>(c.state.history.size()) == c.state.round, "history");
    const std::string again = EncodeCheckpoint(c.state, c.config_fingerprint);
    const DecodedCheckpoint d = DecodeCheckpoint(again, "re-encoded");
    FUZZ_CHECK(d.state.global == c.state.global && d.state.round == c.state.round &&
                   d.state.times_selected == c.state.times_selected &&
                   d.state.strategy_state == c.state.strategy_state &&
                   d.state.transport_state == c.state.transport_state &&
                   d.config_fingerprint == c.config_fingerprint && d.state.dispatches == c.state.dispatches &&
                   d.state.training.size() == c.state.training.size() &&
                   d.state.training_models == c.state.training_models,
               "checkpoint did not round-trip");
  });
}
