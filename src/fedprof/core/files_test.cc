#include "fedprof/core/files.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"

namespace fedprof {
namespace {

// FIPS 180-2 appendix B and the NIST example vectors.
TEST(HashTest, Sha256MatchesPublishedVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::string TempPath(const std::string& name) {
  const std::string dir = testing::TempDir() + "/fedprof_files_test";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

TEST(FilesTest, WriteFileAtomicReplacesTheFile) {
  const std::string path = TempPath("replace.txt");
  WriteFileAtomic(path, "first");
  WriteFileAtomic(path, "second, longer");
  EXPECT_EQ(ReadFile(path), "second, longer");
  EXPECT_FALSE(FileExists(path + ".tmp"));
  WriteFileAtomic(path, "");
  EXPECT_EQ(ReadFile(path), "");
}

TEST(FilesTest, WriteFileAtomicFailsCleanlyInAMissingDirectory) {
  const std::string path = TempPath("no/such/dir/file.txt");
  try {
    WriteFileAtomic(path, "x");
    FAIL() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// The disk fills up in the middle of a write: a child process whose file
// size limit (RLIMIT_FSIZE) is below the new contents, with SIGXFSZ
// ignored so that write(2) fails with EFBIG as on a full disk. The write
// must throw, remove its temporary file, and leave the previous file whole.
TEST(FilesTest, WriteFileAtomicKeepsThePreviousFileWhenTheDiskIsFull) {
  const std::string path = TempPath("full.txt");
  const std::string previous(10000, 'p');
  WriteFileAtomic(path, previous);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
    try {
      WriteFileAtomic(path, std::string(100000, 'n'));
    } catch (const Error& e) {
      const std::string what = e.what();
      // The error names the file and the reason (EFBIG), on one line.
      ::_exit(what.find(path) != std::string::npos &&
                      what.find("File too large") != std::string::npos &&
                      what.find('\n') == std::string::npos
                  ? 0
                  : 4);
    } catch (...) {
      ::_exit(5);
    }
    ::_exit(6);  // the write succeeded past the limit
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: setrlimit failed, 4: bad message, 5: other "
                                       "exception, 6: no error";
  EXPECT_EQ(ReadFile(path), previous);
  EXPECT_FALSE(FileExists(path + ".tmp"));
}

// The same failure at the first byte, when there is no previous file.
TEST(FilesTest, WriteFileAtomicLeavesNothingWhenTheFirstWriteFails) {
  const std::string path = TempPath("none.txt");
  std::filesystem::remove(path);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{0, 0};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
    try {
      WriteFileAtomic(path, "contents");
    } catch (const Error&) {
      ::_exit(0);
    }
    ::_exit(6);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(FileExists(path));
  EXPECT_FALSE(FileExists(path + ".tmp"));
}

}  // namespace
}  // namespace fedprof
