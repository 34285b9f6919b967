#ifndef FEDPROF_DISTRIBUTED_RANK_GROUP_H_
#define FEDPROF_DISTRIBUTED_RANK_GROUP_H_

// The processes of a distributed simulation, as torch.distributed sets them
// up: the torchrun environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK),
// a c10d TCPStore hosted by rank 0 for the rendezvous, and a c10d Gloo
// process group over which ranks exchange messages. Torch and Gloo stay out
// of this header.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/params.h"

namespace fedprof {

// This process's place in a distributed run, from the torchrun variables.
struct DistEnv {
  int rank = 0;
  int world_size = 1;  // 1: not distributed
  std::string master_addr;
  int master_port = 0;
  // LOCAL_WORLD_SIZE: ranks on this machine (1 when unset); a rank's share
  // of the cores when `threads` is 0.
  int local_world_size = 1;
  // Under torchrun (TORCHELASTIC_USE_AGENT_STORE=True) its agent hosts the
  // store at MASTER_ADDR:MASTER_PORT and every rank only connects to it,
  // under the key prefix of the agent's restart attempt.
  bool agent_store = false;
  std::string store_prefix;

  bool distributed() const { return world_size > 1; }
};

// Reads WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, LOCAL_WORLD_SIZE and
// torchrun's TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_RESTART_COUNT
// through `get` (getenv by default). WORLD_SIZE unset, empty or 1 means a
// plain single-process run, and the other variables are not read. Throws
// fedprof::Error naming the variable, its value and what was expected when
// one is missing or malformed.
DistEnv ReadDistEnv(const std::function<const char*(const char*)>& get = nullptr);

// One message between two ranks: a kind and a small integer (the command
// protocol's), bytes (a protobuf message, TOML, JSON), client ids and
// float32 values (a model). It travels as up to four Gloo point-to-point
// messages: a fixed header of lengths, then each non-empty part.
struct RankMessage {
  int64_t kind = 0;
  int64_t arg = 0;
  std::string bytes;
  std::vector<int32_t> ids;
  std::shared_ptr<const FlatParams> floats;  // null: none
};

// A peer rank that is gone (connection closed or reset), silent past the
// timeout, or that sent something that is not a message. what() is one line
// naming the peer and what happened, e.g. "rank 2 was lost (Connection
// reset by peer)".
class RankError : public Error {
 public:
  RankError(int peer, const std::string& message) : Error(message), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

// Membership in the group of env.world_size processes. Construction is the
// rendezvous, as torch.distributed's env:// initialisation does it: rank 0
// hosts a c10d::TCPStore at MASTER_ADDR:MASTER_PORT (unless torchrun's agent
// does), every rank connects to it, and a c10d::ProcessGroupGloo connects
// the ranks pairwise. Messages are point to point, so every failure is that of one
// named peer.
//
// Thread-safety: Send and Recv may run concurrently from different threads
// for different peers (or for the two directions of one peer); one message
// to or from a given peer at a time.
class RankGroup {
 public:
  // Joins the group, waiting at most `timeout_s` for every rank. Throws
  // fedprof::Error naming MASTER_ADDR:MASTER_PORT and the wait when the
  // rendezvous fails. Sets SIGPIPE to be ignored (process-wide), so that a
  // write to a lost peer fails instead of killing the process.
  RankGroup(const DistEnv& env, double timeout_s);
  // A group that saw a failure or was cancelled is left to the process's
  // exit rather than torn down: Gloo may still hold its buffers.
  ~RankGroup();
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }
  // The longest Send or Recv waits for its peer from now on.
  void set_timeout(double timeout_s) { timeout_s_ = timeout_s; }

  // Sends `m` to rank `to` and returns once the peer has taken it; the
  // floats are shared, not copied. Throws RankError when the peer is lost or
  // takes nothing within the timeout, fedprof::Error when the group was
  // cancelled.
  void Send(int to, const RankMessage& m);

  // The next message from rank `from`. Throws RankError when the peer is
  // lost, sends nothing within the timeout or sends a malformed header,
  // fedprof::Error when the group was cancelled.
  RankMessage Recv(int from);

  // Bytes sent to and received from `peer` so far, as Gloo carried them
  // (each message's 48-byte header and its parts).
  int64_t bytes_sent(int peer) const;
  int64_t bytes_received(int peer) const;

  // Ends every Send and Recv in progress, and any to come, with an Error:
  // for a rank that gives up on the run after a peer failed.
  void Cancel();
  bool cancelled() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 0;
};

}  // namespace fedprof

#endif  // FEDPROF_DISTRIBUTED_RANK_GROUP_H_
