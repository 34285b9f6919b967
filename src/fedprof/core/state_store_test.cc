// The client-state store: within its budget, spilled beyond it, saved and
// loaded as a checkpoint holds it, and a corrupt file refused in one line.
#include "fedprof/core/state_store.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::ClearedPath;

StateValues TestState(int id, size_t n = 1000) {
  StateValues v(n);
  for (size_t j = 0; j < n; ++j) v[j] = static_cast<float>(id) + 0.001f * static_cast<float>(j);
  return v;
}

int StateFilesIn(const std::string& dir) {
  int n = 0;
  for (int id = 0; id < 100; ++id) {
    for (int seq = 0; seq < 1000; ++seq) {
      if (FileExists(dir + "/" + std::to_string(id) + "." + std::to_string(seq) + ".state")) ++n;
    }
  }
  return n;
}

TEST(ClientStateStoreTest, StatesBeyondTheBudgetSpillAndComeBackUnchanged) {
  const std::string dir = ClearedPath("state_store", "spill");
  // 4000 bytes a state, a budget of three.
  ClientStateStore store(12000, dir);
  for (int id = 0; id < 10; ++id) store.Put(id, TestState(id));
  EXPECT_EQ(store.count(), 10u);
  EXPECT_LE(store.memory_bytes(), 12000u);
  EXPECT_LE(store.peak_memory_bytes(), 12000u);
  EXPECT_EQ(store.spilled_bytes(), 7u * 4000u);
  EXPECT_EQ(StateFilesIn(dir), 7);
  for (int id = 0; id < 10; ++id) EXPECT_EQ(store.Get(id), TestState(id)) << id;
  EXPECT_TRUE(store.Get(10).empty());
  // A new state replaces the old one's file; an empty one drops the client.
  store.Put(0, TestState(50));
  EXPECT_EQ(store.Get(0), TestState(50));
  store.Put(1, {});
  EXPECT_TRUE(store.Get(1).empty());
  EXPECT_EQ(store.count(), 9u);
  EXPECT_EQ(StateFilesIn(dir), 6) << "9 states, 3 in memory, the replaced files gone";
  // Without a budget nothing spills.
  ClientStateStore unbounded;
  for (int id = 0; id < 10; ++id) unbounded.Put(id, TestState(id));
  EXPECT_EQ(unbounded.memory_bytes(), 40000u);
}

TEST(ClientStateStoreTest, ACheckpointNamesFilesThatStayUntilTwoLaterOnes) {
  const std::string dir = ClearedPath("state_store", "checkpoints");
  ClientStateStore store(4000, dir);
  for (int id = 0; id < 4; ++id) store.Put(id, TestState(id));
  const nlohmann::json first = store.Save(false);
  // The states change after the checkpoint (the next round), then the run dies.
  for (int id = 0; id < 4; ++id) store.Put(id, TestState(id + 10));
  ClientStateStore resumed(4000, dir);
  resumed.Load(first, 4);
  for (int id = 0; id < 4; ++id) EXPECT_EQ(resumed.Get(id), TestState(id)) << "the checkpoint's states, " << id;
  EXPECT_EQ(StateFilesIn(dir), 4) << "the checkpoint's four (the one in memory written for it); later ones removed";
  // Inline, every state travels in the JSON itself.
  const nlohmann::json inline_all = resumed.Save(true);
  for (const auto& [key, value] : inline_all.items()) EXPECT_TRUE(value.is_string()) << key;
  // Two checkpoints later the first one's files are gone.
  for (int id = 0; id < 4; ++id) resumed.Put(id, TestState(id + 20));
  resumed.Save(false);
  resumed.Save(false);
  EXPECT_EQ(StateFilesIn(dir), 4);
  for (int id = 0; id < 4; ++id) EXPECT_EQ(resumed.Get(id), TestState(id + 20));
}

TEST(ClientStateStoreTest, AMissingOrCorruptFileIsOneLineNamingTheClient) {
  const std::string dir = ClearedPath("state_store", "corrupt");
  ClientStateStore store(4000, dir);
  for (int id = 0; id < 3; ++id) store.Put(id, TestState(id));
  const nlohmann::json saved = store.Save(false);
  const std::string file = dir + "/" + saved.at("0").at("file").get<std::string>();
  const std::string whole = ReadFile(file);
  auto refused = [&](const std::string& why) {
    ClientStateStore fresh(4000, dir);
    try {
      fresh.Load(saved, 3);
      ADD_FAILURE() << "loaded: " << why;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("client 0"), std::string::npos) << message;
      EXPECT_NE(message.find(why), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  };
  std::string flipped = whole;
  flipped[flipped.size() - 3] ^= 0x10;
  WriteFileAtomic(file, flipped);
  refused("checksum");
  WriteFileAtomic(file, whole.substr(0, whole.size() - 7));
  refused("truncated");
  std::remove(file.c_str());
  refused("missing");
  // A state file of another client is not this one's.
  WriteStateFile(file, "client 2", TestState(2));
  refused("holds the state of client 2");
  // The durable form (a deployed client's) is the same file.
  WriteStateFile(file, "client 2", TestState(2), /*durable=*/true);
  StateValues durable;
  EXPECT_EQ(ReadStateFile(file, "client 2", &durable), "");
  EXPECT_EQ(durable, TestState(2));
  // Ids and values a checkpoint cannot hold.
  ClientStateStore fresh(4000, dir);
  EXPECT_THROW(fresh.Load({{"7", {{"file", "x"}}}}, 3), Error);
  EXPECT_THROW(fresh.Load({{"0", {{"file", "../escape"}}}}, 3), Error);
  EXPECT_THROW(fresh.Load({{"0", 5}}, 3), Error);
}

}  // namespace
}  // namespace fedprof
