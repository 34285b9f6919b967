#ifndef FEDPROF_RUN_RUN_DIR_STATUS_H_
#define FEDPROF_RUN_RUN_DIR_STATUS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace fedprof {

// What a run directory says about its run, finished or killed: rounds
// completed and planned, best and last accuracy, whether it finished, and
// the round a --resume would continue from (its checkpoint's, checked).
// Throws fedprof::Error when `dir` holds no run. FormatRunDirStatus
// (report/run_status.h) prints it.
nlohmann::json RunDirStatus(const std::string& dir);

}  // namespace fedprof

#endif  // FEDPROF_RUN_RUN_DIR_STATUS_H_
