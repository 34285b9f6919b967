#ifndef FEDPROF_TESTS_TEST_DIRS_H_
#define FEDPROF_TESTS_TEST_DIRS_H_

// Where a test writes: a folder of its own under the test temporary
// directory, fedprof_<suite>_<name>, holding nothing from an earlier run.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fedprof/core/files.h"

namespace fedprof::testing_support {

// The folder's path, with whatever an earlier run left there removed; the
// folder itself is not created, so a test can check that a refused run
// wrote nothing.
inline std::string ClearedPath(const std::string& suite, const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/fedprof_" + suite + "_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// The same folder, created empty.
inline std::string FreshDir(const std::string& suite, const std::string& name) {
  const std::string dir = ClearedPath(suite, name);
  MakeDirs(dir);
  return dir;
}

// Whether Debian's Fashion-MNIST (install-deps) is here; tests of real runs
// skip without it.
inline bool HaveFashionMnist() { return FileExists("/usr/share/datasets/fashion-mnist"); }

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_TEST_DIRS_H_
