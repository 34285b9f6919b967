#ifndef FEDPROF_CORE_LOG_H_
#define FEDPROF_CORE_LOG_H_

#include <string>

namespace fedprof {

// The library's one way to speak. Each call prints one whole line, even
// when threads log at once: warnings (a refused client, a missing plot) on
// stderr as "warning: <message>", progress lines on stdout, flushed so that
// a supervising process sees them at once.
void LogWarning(const std::string& message);
void LogProgress(const std::string& line);

}  // namespace fedprof

#endif  // FEDPROF_CORE_LOG_H_
