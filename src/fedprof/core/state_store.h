#ifndef FEDPROF_CORE_STATE_STORE_H_
#define FEDPROF_CORE_STATE_STORE_H_

// What clients keep between rounds (a client algorithm's state: SCAFFOLD's
// c_i, MOON's previous model), by client id, within a byte budget
// (client_state.memory_mb): beyond it the states least recently used are
// spilled to files of a directory under the run's and read back when their
// client trains again. A checkpoint holds the states in memory and names
// the spilled files, which stay on disk unchanged until a later checkpoint
// no longer names them: a run killed at any moment resumes bit for bit.

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace fedprof {

using StateValues = std::vector<float>;

// One state in a file of its own: a header (the format, the state's name,
// the count of values, their SHA-256) and the values as little-endian
// float32, written by WriteFileAtomic: a reader sees the old file or the
// new one. `durable`: synced to disk as well, as a deployed client's own
// state is; a run's spilled states are not (10⁴ files a round; one torn by
// a power loss is refused in one line when the run resumes).
void WriteStateFile(const std::string& path, const std::string& name, const StateValues& values,
                    bool durable = false);
// The values of the state file `path` named `name`, or why there are none
// in one line ("" and *values set when the file is whole): missing,
// truncated, of another state, or failing its checksum.
std::string ReadStateFile(const std::string& path, const std::string& name, StateValues* values);

class ClientStateStore {
 public:
  // No budget (0) keeps every state in memory; `spill_dir` is where states
  // beyond `budget_bytes` go (required with a budget; made at the first
  // spill, and owned by the store: it removes files there no state names).
  explicit ClientStateStore(size_t budget_bytes = 0, std::string spill_dir = "");

  // Client `id`'s state, or empty when it keeps none. Thread-safe, as are
  // all the calls below.
  StateValues Get(int id);
  // Keeps `values` as client `id`'s state (empty: drops it).
  void Put(int id, StateValues values);

  // For checkpoints: {id: EncodeFloats(values) | {"file": name}}. With a
  // budget every state is in a file the checkpoint names (those kept in
  // memory written once), which outlives the next two calls; without one,
  // or with `inline_all` (states that travel between processes), every
  // state is inline.
  nlohmann::json Save(bool inline_all);
  // Replaces every state by a checkpoint's; throws fedprof::Error naming
  // the client when a state is malformed, not one of `num_clients`, or its
  // file is missing or corrupt. Files of the directory no state names
  // (written after that checkpoint) are removed.
  void Load(const nlohmann::json& saved, int num_clients);

  size_t count() const;
  size_t memory_bytes() const;   // of the states in memory
  size_t spilled_bytes() const;  // of the states in files
  size_t peak_memory_bytes() const;  // the most memory_bytes() has been after a Put

 private:
  // A state in memory, in a file, or both (written for a checkpoint and
  // still in memory).
  struct Entry {
    StateValues values;               // when in memory
    std::string file;                 // when on disk: its name in spill_dir_
    std::list<int>::iterator recent;  // in recent_, when in memory
    size_t spilled_size = 0;          // values in the file
  };

  // Spills the least recently used states until memory fits the budget.
  void SpillLocked();
  // Writes client `id`'s state to a file of its own unless it has one.
  void WriteLocked(int id, Entry* e);
  // Removes `file` unless a checkpoint may still name it.
  void DropFileLocked(const std::string& file);
  std::string PathOf(const std::string& file) const { return spill_dir_ + "/" + file; }

  size_t budget_bytes_;
  std::string spill_dir_;
  mutable std::mutex mutex_;
  std::unordered_map<int, Entry> entries_;
  std::list<int> recent_;  // ids in memory, most recently used first
  size_t memory_bytes_ = 0, spilled_bytes_ = 0, peak_memory_bytes_ = 0;
  uint64_t next_file_ = 0;
  // Files the last two checkpoints name: the one being written and the one
  // before it, which stands until the new one is on disk.
  std::set<std::string> saved_last_, saved_before_;
};

}  // namespace fedprof

#endif  // FEDPROF_CORE_STATE_STORE_H_
