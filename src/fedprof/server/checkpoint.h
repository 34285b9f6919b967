#ifndef FEDPROF_SERVER_CHECKPOINT_H_
#define FEDPROF_SERVER_CHECKPOINT_H_

#include <string>

#include "fedprof/server/server.h"

namespace fedprof {

// One file holds the whole run state (global model, round, per-client state,
// metrics so far), written atomically, so a run killed at any moment resumes
// from the last completed round. Generator states need no saving: every
// stream is derived from the seed and the round (core/rng.h).
//
// Format 2: the line "FEDPROF-CHECKPOINT 2", a JSON header line (with the
// fingerprint of the run's config, Config::Fingerprint()), the global model
// as raw little-endian float32, then the SHA-256 of everything before it
// (32 bytes). A truncated, bit-flipped or format-1 file is refused, and so
// is the checkpoint of another config.
constexpr int kCheckpointFormat = 2;

void SaveCheckpoint(const std::string& path, const ServerState& state,
                    const std::string& config_fingerprint);

// The state saved in `path` by a run whose config has the fingerprint
// `config_fingerprint`. Throws fedprof::Error naming the file and what is
// wrong with it: unreadable, another format, a checksum that does not
// match, a malformed header, or another config's fingerprint.
ServerState LoadCheckpoint(const std::string& path, const std::string& config_fingerprint);

// A checkpoint file's contents, decoded and checked (format, checksum,
// header, model section) but not matched with a config; `origin` names the
// file in errors. Throws fedprof::Error.
struct DecodedCheckpoint {
  ServerState state;
  std::string config_fingerprint;
};
DecodedCheckpoint DecodeCheckpoint(const std::string& bytes, const std::string& origin);

// The bytes SaveCheckpoint writes.
std::string EncodeCheckpoint(const ServerState& state, const std::string& config_fingerprint);

}  // namespace fedprof

#endif  // FEDPROF_SERVER_CHECKPOINT_H_
