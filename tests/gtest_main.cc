// The test binary's main: GoogleTest's, ending through EndProcess so that
// each of the suite's processes skips LibTorch's teardown.
#include <gtest/gtest.h>

#include "fedprof/core/process_exit.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return fedprof::EndProcess(RUN_ALL_TESTS());
}
