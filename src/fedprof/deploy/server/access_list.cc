#include "fedprof/deploy/server/access_list.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"

namespace fedprof::deploy {
namespace {

std::map<int, std::string> IdsOf(const nlohmann::json& object, const std::string& where) {
  std::map<int, std::string> out;
  if (!object.is_object()) throw Error(where + " is not an object");
  for (const auto& [key, value] : object.items()) {
    const int id = ParseClientId(key, 1000000000);
    if (id < 0 || !value.is_string()) throw Error(where + ": entry '" + Printable(key, 20) + "'");
    out[id] = value.get<std::string>();
  }
  return out;
}

// What tells one version of the file from the next: it is replaced whole
// (a new inode each time), so two writes in one tick of the clock differ
// too.
std::string VersionOf(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  return std::to_string(info.st_ino) + ":" + std::to_string(info.st_size) + ":" +
         std::to_string(info.st_mtim.tv_sec) + "." + std::to_string(info.st_mtim.tv_nsec);
}

}  // namespace

AccessEntries ReadAccessList(const std::string& path) {
  try {
    const nlohmann::json list = nlohmann::json::parse(ReadFile(path));
    AccessEntries entries;
    entries.enrolled = IdsOf(list.at("enrolled"), "enrolled");
    entries.revoked = IdsOf(list.at("revoked"), "revoked");
    return entries;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a federation's access list (" + e.what() + ")");
  } catch (const Error& e) {
    throw Error(path + ": not a federation's access list: " + e.what());
  }
}

void WriteAccessList(const std::string& path, const AccessEntries& entries) {
  nlohmann::json list = {{"enrolled", nlohmann::json::object()}, {"revoked", nlohmann::json::object()}};
  for (const auto& [id, sha] : entries.enrolled) list["enrolled"][std::to_string(id)] = sha;
  for (const auto& [id, why] : entries.revoked) list["revoked"][std::to_string(id)] = why;
  WriteFileAtomic(path, list.dump(1) + "\n");
}

AccessList::AccessList(std::string path) : path_(std::move(path)) {}

void AccessList::Refresh() {
  const auto now = std::chrono::steady_clock::now();
  if (read_once_ && now - checked_ < std::chrono::seconds(1)) return;
  checked_ = now;
  read_once_ = true;
  const std::string stamp = VersionOf(path_);
  if (stamp == stamp_ && !stamp.empty() && problem_.empty()) return;
  try {
    entries_ = ReadAccessList(path_);
    problem_.clear();
    stamp_ = stamp;
  } catch (const Error& e) {
    problem_ = e.what();
    stamp_ = stamp;
  }
}

std::string AccessList::Refusal(int id, const std::string& cert_sha256) {
  if (path_.empty()) return "";
  std::lock_guard<std::mutex> lock(mutex_);
  Refresh();
  if (!problem_.empty()) return "the federation's access list cannot be read: " + problem_;
  const std::string client = "client " + std::to_string(id);
  if (const auto revoked = entries_.revoked.find(id); revoked != entries_.revoked.end()) {
    return client + " is revoked (" + revoked->second + ")";
  }
  const auto enrolled = entries_.enrolled.find(id);
  if (enrolled == entries_.enrolled.end()) return client + " is not enrolled in this federation";
  if (enrolled->second != cert_sha256) {
    return client + "'s certificate is not the one it is enrolled with (re-keyed: use its new key)";
  }
  return "";
}

}  // namespace fedprof::deploy
