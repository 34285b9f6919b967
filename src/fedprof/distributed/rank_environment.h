#ifndef FEDPROF_DISTRIBUTED_RANK_ENVIRONMENT_H_
#define FEDPROF_DISTRIBUTED_RANK_ENVIRONMENT_H_

// What `fedprof launch` and Python's fedprof.launch() give each rank of a
// run on this machine: torchrun's variables (rank_group.h reads them), the
// store on loopback.

#include <string>
#include <utility>
#include <vector>

namespace fedprof {

// The variables of rank `rank` of `nproc`, whose store listens on
// 127.0.0.1:`port`; the one group of ranks is group 0.
inline std::vector<std::pair<std::string, std::string>> LocalRankEnvironment(int rank, int nproc, int port) {
  return {{"MASTER_ADDR", "127.0.0.1"},           {"MASTER_PORT", std::to_string(port)},
          {"WORLD_SIZE", std::to_string(nproc)},  {"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},   {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
          {"GROUP_RANK", "0"}};
}

}  // namespace fedprof

#endif  // FEDPROF_DISTRIBUTED_RANK_ENVIRONMENT_H_
