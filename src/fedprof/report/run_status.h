#ifndef FEDPROF_REPORT_RUN_STATUS_H_
#define FEDPROF_REPORT_RUN_STATUS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace fedprof {

// What a run directory says about its run, finished or killed: rounds
// completed and planned, best and last accuracy, whether it finished, and
// the round a --resume would continue from (its checkpoint's, checked).
// Throws fedprof::Error when `dir` holds no run.
nlohmann::json RunDirStatus(const std::string& dir);

// The same as a few lines of text.
std::string FormatRunDirStatus(const nlohmann::json& status);

// A monitor's /status as a few lines of text.
std::string FormatMonitorStatus(const nlohmann::json& status);

}  // namespace fedprof

#endif  // FEDPROF_REPORT_RUN_STATUS_H_
