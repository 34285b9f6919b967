#ifndef FEDPROF_REPORT_RUN_STATUS_H_
#define FEDPROF_REPORT_RUN_STATUS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace fedprof {

// A run's status as a few lines of text, from plain JSON: report/ reads no
// run directory or checkpoint itself.

// A run directory's status, as RunDirStatus (run/run_dir.h) gives it.
std::string FormatRunDirStatus(const nlohmann::json& status);

// A monitor's /status as a few lines of text.
std::string FormatMonitorStatus(const nlohmann::json& status);

}  // namespace fedprof

#endif  // FEDPROF_REPORT_RUN_STATUS_H_
