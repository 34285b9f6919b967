#ifndef FEDPROF_CORE_PROCESS_EXIT_H_
#define FEDPROF_CORE_PROCESS_EXIT_H_

namespace fedprof {

// For main's return: ends the process with `code` once stdout and stderr
// are flushed, without running static destructors. Tearing down LibTorch's
// operator registries takes a tenth of a short command's time, for nothing
// a process needs once its outputs are written (every file is closed by the
// code that wrote it). Under AddressSanitizer it returns `code`, so that
// main returns and LeakSanitizer's check at exit still runs.
int EndProcess(int code);

}  // namespace fedprof

#endif  // FEDPROF_CORE_PROCESS_EXIT_H_
