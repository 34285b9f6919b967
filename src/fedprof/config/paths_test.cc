#include "fedprof/config/paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "fedprof/core/files.h"

namespace fedprof {
namespace {

Config ConfigWith(const std::string& assignment) {
  Config config;
  config.SetAssignment(assignment, "test");
  return config;
}

// A config names files only inside its roots, resolved as the process
// opens them: ".." and symbolic links that lead out are refused, as is a
// sibling directory that merely shares the root's prefix; the line names
// the option and the policy, and is the same whether the file exists.
TEST(PathConfinementTest, AConfigsFilesLieInTheRootsOnceResolved) {
  const std::string dir = ::testing::TempDir() + "/fedprof_paths";
  std::filesystem::remove_all(dir);
  MakeDirs(dir + "/root/data");
  MakeDirs(dir + "/rootless");
  WriteFileAtomic(dir + "/root/data/train.csv", "a,b\n1,2\n");
  WriteFileAtomic(dir + "/secret.key", "-----BEGIN PRIVATE KEY-----\n");
  std::filesystem::create_symlink(dir + "/secret.key", dir + "/root/leak");
  std::filesystem::create_symlink(dir + "/root/data", dir + "/rootless/inward");
  const std::vector<std::string> roots = {dir + "/root"};
  const std::string policy = "the test's roots";

  for (const std::string& inside :
       {dir + "/root/data/train.csv", dir + "/root/data/../data/train.csv", dir + "/root/data",
        dir + "/root/not-yet-there.csv", dir + "/rootless/inward/train.csv"}) {
    EXPECT_TRUE(InsideRoots(inside, roots)) << inside;
    EXPECT_EQ(PathRefusal(ConfigWith("data.train_file=" + inside), roots, policy), "") << inside;
  }
  for (const std::string& outside : {std::string("/etc/passwd"), dir + "/root/../secret.key", dir + "/root/leak",
                                     dir + "/rootless/x.csv", dir + "/root/data/../../../../../../etc/passwd"}) {
    EXPECT_FALSE(InsideRoots(outside, roots)) << outside;
  }
  EXPECT_EQ(PathRefusal(ConfigWith("data.train_file=" + dir + "/root/leak"), roots, policy),
            "data.train_file = " + dir + "/root/leak: outside the directories the test's roots lets a run read");
  // Whether the file is there is not told.
  const std::string missing = PathRefusal(ConfigWith("data.dir=/etc/nothing-here"), roots, policy);
  const std::string there = PathRefusal(ConfigWith("data.dir=/etc"), roots, policy);
  EXPECT_EQ(missing.substr(missing.find(':')), there.substr(there.find(':')));
  // Every path option is confined, skipped ones aside; with no roots, none may be set.
  for (const std::string& option : PathOptions()) {
    const Config config = ConfigWith(option + "=/etc/passwd");
    EXPECT_EQ(PathRefusal(config, roots, policy).rfind(option + " = /etc/passwd: outside", 0), 0u) << option;
    EXPECT_EQ(PathRefusal(config, roots, policy, {option}), "") << option;
    EXPECT_NE(PathRefusal(ConfigWith(option + "=" + dir + "/root/data"), {}, "no policy").find("(it names none)"),
              std::string::npos);
  }
  EXPECT_EQ(PathRefusal(Config(), {}, policy), "") << "the defaults name no file";
  // A root that cannot be resolved (a loop of links) holds nothing; it does
  // not let everything in.
  std::filesystem::create_symlink(dir + "/loop-b", dir + "/loop-a");
  std::filesystem::create_symlink(dir + "/loop-a", dir + "/loop-b");
  EXPECT_FALSE(InsideRoots("/etc/passwd", {dir + "/loop-a/x"}));
  EXPECT_FALSE(InsideRoots(dir + "/loop-a/x", {dir}));
}

}  // namespace
}  // namespace fedprof
