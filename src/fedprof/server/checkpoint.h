#ifndef FEDPROF_SERVER_CHECKPOINT_H_
#define FEDPROF_SERVER_CHECKPOINT_H_

#include <string>

#include "fedprof/server/server.h"

namespace fedprof {

// One file holds the whole run state (global model, round, per-client state,
// metrics so far), written atomically, so a run killed at any moment resumes
// from the last completed round. Format: the line "FEDPROF-CHECKPOINT 1", a
// JSON header line, then the global model as raw little-endian float32.
// Generator states need no saving: every stream is derived from the seed and
// the round (core/rng.h).
void SaveCheckpoint(const std::string& path, const ServerState& state);

// Throws fedprof::Error naming the file and what is wrong with it.
ServerState LoadCheckpoint(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_SERVER_CHECKPOINT_H_
