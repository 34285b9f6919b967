#ifndef FEDPROF_RUN_RUN_DIR_H_
#define FEDPROF_RUN_RUN_DIR_H_

// A run's folder (--out): what a new run may do to it, and what it says
// about its run.

#include <nlohmann/json.hpp>
#include <string>

namespace fedprof {

// Every file a run writes into its folder besides config.toml (RunRecorder):
// what a new run into the folder replaces.
inline constexpr const char* kRunOutputs[] = {"checkpoint.bin", "metrics.csv", "evaluation.csv",
                                              "scores.csv",     "clients.csv", "summary.json",
                                              "selection.png",  "scores.png",  "accuracy.png"};

// What a new run does with a run already in its folder, one that finished a
// round (a checkpoint or a summary): refuse (nothing is lost unasked), or
// replace it (--overwrite).
enum class ExistingRun { kRefuse, kReplace };

// Throws, naming how to continue or replace it, when `dir` holds a run and
// `existing` is kRefuse; else removes what an earlier run left there.
void ClaimRunDir(const std::string& dir, ExistingRun existing);

// What a run directory says about its run, finished or killed: rounds
// completed and planned, best and last accuracy, whether it finished, and
// the round a --resume would continue from (its checkpoint's, checked).
// Throws fedprof::Error when `dir` holds no run. FormatRunDirStatus
// (report/run_status.h) prints it.
nlohmann::json RunDirStatus(const std::string& dir);

}  // namespace fedprof

#endif  // FEDPROF_RUN_RUN_DIR_H_
