#include "fedprof/deploy/server/access_list.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "fedprof/core/files.h"

namespace fedprof::deploy {
namespace {

// Served: an enrolled id under its certificate. Refused, each in one line:
// a revoked id, an id never enrolled, an enrolled id under another
// certificate (a re-keyed node's old key); a list that cannot be read
// refuses everyone. A rewritten list holds from its next read on.
TEST(AccessListTest, ServesEachEnrolledNodeUnderItsCertificateOnly) {
  const std::string path = ::testing::TempDir() + "/access_list.json";
  AccessEntries entries;
  entries.enrolled[0] = std::string(64, 'a');
  entries.enrolled[1] = std::string(64, 'b');
  entries.revoked[2] = "by operator-alice at 2026-12-01T00:00:00Z";
  WriteAccessList(path, entries);
  AccessList list(path);
  EXPECT_EQ(list.Refusal(0, std::string(64, 'a')), "");
  EXPECT_EQ(list.Refusal(2, std::string(64, 'c')), "client 2 is revoked (by operator-alice at 2026-12-01T00:00:00Z)");
  EXPECT_EQ(list.Refusal(3, std::string(64, 'a')), "client 3 is not enrolled in this federation");
  EXPECT_NE(list.Refusal(1, std::string(64, 'a')).find("client 1's certificate is not the one it is enrolled with"),
            std::string::npos);

  entries.revoked[0] = "by operator-bob at 2026-12-01T00:01:00Z";
  entries.enrolled.erase(0);
  WriteAccessList(path, entries);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // read again at most once a second
  EXPECT_NE(list.Refusal(0, std::string(64, 'a')).find("client 0 is revoked (by operator-bob"), std::string::npos);

  WriteFileAtomic(path, "{\"enrolled\": 3}");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const std::string unreadable = list.Refusal(1, std::string(64, 'b'));
  EXPECT_NE(unreadable.find("the federation's access list cannot be read"), std::string::npos) << unreadable;
  EXPECT_EQ(unreadable.find('\n'), std::string::npos);
  EXPECT_EQ(AccessList("").Refusal(5, ""), "") << "without a list, every certificate of the CA is served";
}

}  // namespace
}  // namespace fedprof::deploy
