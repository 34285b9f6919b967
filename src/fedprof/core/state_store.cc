#include "fedprof/core/state_store.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

constexpr char kMagic[8] = {'F', 'P', 'S', 'T', 'A', 'T', 'E', '1'};
constexpr size_t kMaxNameLength = 256;
constexpr const char* kSuffix = ".state";

void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(const std::string& s, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

std::string Payload(const StateValues& values) {
  std::string out(values.size() * sizeof(float), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return out;
}

}  // namespace

void WriteStateFile(const std::string& path, const std::string& name, const StateValues& values, bool durable) {
  const std::string payload = Payload(values);
  std::string bytes(kMagic, sizeof(kMagic));
  PutU64(name.size(), &bytes);
  bytes += name;
  PutU64(values.size(), &bytes);
  const Sha256Digest digest = Sha256(payload);
  bytes.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  bytes += payload;
  WriteFileAtomic(path, bytes, /*sync=*/durable);
}

std::string ReadStateFile(const std::string& path, const std::string& name, StateValues* values) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "its state file " + path + " is missing";
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string truncated = "its state file " + path + " is truncated or not a state file";
  if (bytes.size() < sizeof(kMagic) + 8 || bytes.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) != 0) {
    return truncated;
  }
  size_t at = sizeof(kMagic);
  const uint64_t name_length = GetU64(bytes, at);
  at += 8;
  if (name_length > kMaxNameLength || bytes.size() < at + name_length + 8 + 32) return truncated;
  if (bytes.compare(at, name_length, name) != 0 || name_length != name.size()) {
    return "its state file " + path + " holds the state of " + Printable(bytes.substr(at, name_length)) +
           ", not of " + name;
  }
  at += name_length;
  const uint64_t count = GetU64(bytes, at);
  at += 8;
  const size_t digest_at = at;
  at += 32;
  if (count > (bytes.size() - at) / sizeof(float) || bytes.size() - at != count * sizeof(float)) return truncated;
  const std::string payload = bytes.substr(at);
  const Sha256Digest digest = Sha256(payload);
  if (bytes.compare(digest_at, 32, reinterpret_cast<const char*>(digest.data()), 32) != 0) {
    return "its state file " + path + " fails its checksum (corrupt)";
  }
  values->resize(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(static_cast<unsigned char>(payload[4 * i + b])) << (8 * b);
    std::memcpy(&(*values)[i], &bits, sizeof(bits));
  }
  return "";
}

ClientStateStore::ClientStateStore(size_t budget_bytes, std::string spill_dir)
    : budget_bytes_(budget_bytes), spill_dir_(std::move(spill_dir)) {
  if (budget_bytes_ > 0) {
    if (spill_dir_.empty()) throw Error("client_state.memory_mb: a budget needs a directory to spill to");
  }
}

namespace {

std::string StateName(int id) { return "client " + std::to_string(id); }

}  // namespace

StateValues ClientStateStore::Get(int id) {
  std::string file;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(id);
    if (it == entries_.end()) return {};
    Entry& e = it->second;
    if (!e.values.empty()) {
      recent_.splice(recent_.begin(), recent_, e.recent);
      return e.values;
    }
    file = e.file;
  }
  // Read without the lock: only this client's own Put replaces its file.
  StateValues values;
  const std::string why = ReadStateFile(PathOf(file), StateName(id), &values);
  if (!why.empty()) throw Error("client state: client " + std::to_string(id) + ": " + why);
  return values;
}

void ClientStateStore::Put(int id, StateValues values) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(id);
  if (it != entries_.end()) {
    Entry& old = it->second;
    if (!old.values.empty()) {
      memory_bytes_ -= old.values.size() * sizeof(float);
      recent_.erase(old.recent);
    }
    if (!old.file.empty()) {
      spilled_bytes_ -= old.spilled_size * sizeof(float);
      DropFileLocked(old.file);
    }
    entries_.erase(it);
  }
  if (values.empty()) return;
  Entry& e = entries_[id];
  memory_bytes_ += values.size() * sizeof(float);
  e.values = std::move(values);
  recent_.push_front(id);
  e.recent = recent_.begin();
  SpillLocked();
  peak_memory_bytes_ = std::max(peak_memory_bytes_, memory_bytes_);
}

void ClientStateStore::SpillLocked() {
  if (budget_bytes_ == 0) return;
  while (memory_bytes_ > budget_bytes_ && !recent_.empty()) {
    const int id = recent_.back();
    Entry& e = entries_.at(id);
    WriteLocked(id, &e);  // unless a checkpoint wrote it already
    memory_bytes_ -= e.values.size() * sizeof(float);
    StateValues().swap(e.values);
    recent_.pop_back();
  }
}

void ClientStateStore::WriteLocked(int id, Entry* e) {
  if (!e->file.empty()) return;
  MakeDirs(spill_dir_);
  e->file = std::to_string(id) + "." + std::to_string(next_file_++) + kSuffix;
  WriteStateFile(PathOf(e->file), StateName(id), e->values);
  e->spilled_size = e->values.size();
  spilled_bytes_ += e->spilled_size * sizeof(float);
}

void ClientStateStore::DropFileLocked(const std::string& file) {
  if (saved_last_.count(file) == 0 && saved_before_.count(file) == 0) std::remove(PathOf(file).c_str());
}

nlohmann::json ClientStateStore::Save(bool inline_all) {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = nlohmann::json::object();
  std::set<std::string> named;
  // With a budget every state goes to its file, a state in memory staying
  // there too: the checkpoint names files, and never holds more than names.
  const bool as_files = budget_bytes_ > 0 && !inline_all;
  for (auto& [id, e] : entries_) {
    const std::string key = std::to_string(id);
    if (as_files) {
      WriteLocked(id, &e);
      out[key] = {{"file", e.file}};
      named.insert(e.file);
    } else if (!e.values.empty()) {
      out[key] = EncodeFloats(e.values);
    } else {
      StateValues values;
      const std::string why = ReadStateFile(PathOf(e.file), StateName(id), &values);
      if (!why.empty()) throw Error("client state: client " + key + ": " + why);
      out[key] = EncodeFloats(values);
    }
  }
  // The checkpoint before the last is replaced on disk by now: the files
  // only it named go.
  for (const std::string& file : saved_before_) {
    if (saved_last_.count(file) == 0 && named.count(file) == 0) std::remove(PathOf(file).c_str());
  }
  saved_before_ = std::move(saved_last_);
  saved_last_ = std::move(named);
  return out;
}

void ClientStateStore::Load(const nlohmann::json& saved, int num_clients) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  recent_.clear();
  memory_bytes_ = spilled_bytes_ = 0;
  saved_last_.clear();
  saved_before_.clear();
  if (!saved.is_object()) throw Error("checkpoint: client states are not a JSON object");
  std::set<std::string> named;
  for (const auto& [key, value] : saved.items()) {
    const int id = ParseClientId(key, num_clients);
    if (id < 0) {
      throw Error("checkpoint: state of client '" + Printable(key) + "', not one of the " +
                  std::to_string(num_clients) + " clients of this run");
    }
    const std::string client = "checkpoint: client " + key + "'s state";
    Entry& e = entries_[id];
    if (value.is_string()) {
      e.values = DecodeFloats(value.get<std::string>());
      memory_bytes_ += e.values.size() * sizeof(float);
      recent_.push_back(id);
      e.recent = std::prev(recent_.end());
      continue;
    }
    if (!value.is_object() || !value.contains("file") || !value.at("file").is_string()) {
      throw Error(client + " is neither values nor a file");
    }
    e.file = value.at("file").get<std::string>();
    if (spill_dir_.empty() || e.file.find('/') != std::string::npos || e.file.rfind('.', 0) == 0) {
      throw Error(client + " names a file '" + Printable(e.file) + "' this run cannot read");
    }
    StateValues values;
    const std::string why = ReadStateFile(PathOf(e.file), StateName(id), &values);
    if (!why.empty()) throw Error(client + ": " + why);
    e.spilled_size = values.size();
    spilled_bytes_ += e.spilled_size * sizeof(float);
    named.insert(e.file);
  }
  saved_last_ = named;
  // Files written after that checkpoint (by the run it resumes) are no state.
  if (!spill_dir_.empty()) {
    if (DIR* dir = opendir(spill_dir_.c_str())) {
      while (const dirent* entry = readdir(dir)) {
        const std::string file = entry->d_name;
        if (file == "." || file == ".." || named.count(file) != 0) continue;
        std::remove(PathOf(file).c_str());
      }
      closedir(dir);
    }
  }
  SpillLocked();
  peak_memory_bytes_ = memory_bytes_;
}

size_t ClientStateStore::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t ClientStateStore::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_bytes_;
}

size_t ClientStateStore::peak_memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_memory_bytes_;
}

size_t ClientStateStore::spilled_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spilled_bytes_;
}

}  // namespace fedprof
