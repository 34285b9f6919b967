#include "fedprof/run/run_dir.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/server/checkpoint.h"

namespace fedprof {

void ClaimRunDir(const std::string& dir, ExistingRun existing) {
  for (const char* done : {"checkpoint.bin", "summary.json"}) {
    if (existing == ExistingRun::kRefuse && FileExists(dir + "/" + done)) {
      throw Error(dir + ": holds a run already (" + done + "); continue it with --resume " + dir +
                  ", give another --out, or replace it with --overwrite (overwrite=True in Python)");
    }
  }
  for (const char* output : kRunOutputs) {
    const std::string path = dir + "/" + output;
    if (std::remove(path.c_str()) != 0 && errno != ENOENT) {
      throw Error(path + ": cannot remove the earlier run's file: " + std::strerror(errno));
    }
  }
}

nlohmann::json RunDirStatus(const std::string& dir) {
  const std::string config_path = dir + "/config.toml";
  const std::string checkpoint_path = dir + "/checkpoint.bin";
  if (!FileExists(config_path)) {
    throw Error(dir + ": not a run directory (no config.toml)");
  }
  Config config;
  config.MergeTomlFile(config_path);
  nlohmann::json s;
  s["dir"] = dir;
  s["strategy"] = config.options().strategy.name;
  s["seed"] = config.options().seed;
  s["rounds_planned"] = config.options().rounds;
  s["config_digest"] = config.Fingerprint();
  if (!FileExists(checkpoint_path)) {
    s["state"] = "not started";
    s["round"] = 0;
    s["resume_from_round"] = 1;
    return s;
  }
  // The checkpoint, checked whole (format, checksum, this config's
  // fingerprint): the round a --resume would really continue after.
  const ServerState state = LoadCheckpoint(checkpoint_path, config.Fingerprint());
  s["round"] = state.round;
  double best = -1;
  int64_t best_round = 0;
  const RoundMetrics* last = nullptr;
  for (const RoundMetrics& m : state.history) {
    if (!m.evaluated) continue;
    last = &m;
    if (m.accuracy > best) {
      best = m.accuracy;
      best_round = m.round;
    }
  }
  s["best_accuracy"] = last ? nlohmann::json(best) : nlohmann::json(nullptr);
  s["best_round"] = best_round;
  s["last_accuracy"] = last ? nlohmann::json(last->accuracy) : nlohmann::json(nullptr);
  s["wall_s"] = state.history.empty() ? 0.0 : state.history.back().wall_s;
  const bool finished = FileExists(dir + "/summary.json") && state.round >= config.options().rounds;
  s["state"] = finished ? "finished" : "stopped";
  s["resume_from_round"] = state.round + 1;
  return s;
}

}  // namespace fedprof
